import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Message
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.providers.embeddings import embed_texts
from apps.search.models import StagedEmbedding
from apps.search.registry import SOURCES
from apps.search.services import source_stage
from apps.skills.models import SkillExperience
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)
from tests.fixtures import tau_trajectories
from tests.search.makers import MAKERS
from tests.skills.factories import tau_session

pytestmark = pytest.mark.django_db


def test_every_type_with_vectors_knows_its_embedding_text():
    assert all(source.embedding_text for source in SOURCES.values())


def test_reembedding_what_the_write_paths_stored_changes_no_vector(client_a, add_messages, settings):
    """The registry's embedding text is the one the writes embedded, so `reembed` cannot drift from them."""
    settings.LLM_PROVIDER = "rules"
    message = MAKERS["message"](client_a, "alice", "Melanie: we went camping in Yosemite", add_messages)
    skill = MAKERS["procedural"](client_a, "alice", "book a flight after checking the profile")
    trajectory = next(item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"])
    session = tau_session(client_a, trajectory)
    task_execute(
        task_id=MemoryTask.objects.get(task_type="distill_session", payload__session=str(session.pk)).pk, worker="test"
    )
    experience = SkillExperience.objects.filter(session=session).first()
    assert experience is not None
    for memory_type, item in (("message", message), ("procedural", skill), ("experience", experience)):
        item.refresh_from_db()
        (vector,) = embed_texts([SOURCES[memory_type].embedding_text(item)])
        assert list(item.embedding) == pytest.approx(vector, abs=1e-6), memory_type


def test_reembed_switches_every_stale_vector_to_the_current_model(client_a, add_messages, settings):
    items = {
        memory_type: make(client_a, "alice", f"zebrafish {memory_type} notes", add_messages)
        for memory_type, make in MAKERS.items()
    }
    for item in items.values():
        type(item).objects.filter(pk=item.pk).update(embedding_model="old-model", embedding=[1.0] + [0.0] * 383)

    out = StringIO()
    call_command("reembed", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["model"] == "hash-384"
    for memory_type, item in items.items():
        assert result["reembedded"][memory_type] >= 1, memory_type
        item.refresh_from_db()
        assert item.embedding_model == "hash-384"
        assert list(item.embedding)[:1] != [1.0], memory_type  # a real vector of its text, not the old one
    again = StringIO()
    call_command("reembed", "--json", stdout=again)
    assert set(json.loads(again.getvalue())["reembedded"].values()) == {0}  # nothing stale is left
    assert Message.objects.exclude(embedding_model="hash-384").count() == 0


def test_reembed_rejects_unknown_types():
    with pytest.raises(CommandError, match="Unknown memory type"):
        call_command("reembed", "--type", "dreams")


OLD, NEW = "hash-384", "openai:text-embedding-3-small"


def _reembed(*options) -> dict:
    out = StringIO()
    call_command("reembed", "--json", *options, stdout=out)
    return json.loads(out.getvalue())


def _embedding_hits(client, query):
    from apps.search.engine import search

    return [
        hit.instance.pk
        for hit in search(
            reader=client.reader,
            query=query,
            memory_types=["message"],
            method="embedding",
            limit=10,
            filters={"user_id": "alice"},
            reranker="none",
        )
    ]


def _embedding_calls(fake_openai):
    return sum(
        len(request["body"]["input"]) for request in fake_openai.requests if request["path"].endswith("/embeddings")
    )


@pytest.fixture
def new_model(fake_openai, settings):
    """The model the operator moves to (the fake server's embeddings: another model name)."""

    def use(new: bool) -> None:
        settings.EMBEDDING_PROVIDER, settings.EMBEDDING_MODEL = (
            ("openai", "text-embedding-3-small") if new else ("hash", "")
        )

    return use


def test_a_search_ranks_by_distance_only_the_vectors_of_its_own_model(client_a, add_messages, new_model):
    item = MAKERS["message"](client_a, "alice", "zebrafish spawning notes", add_messages)
    assert _embedding_hits(client_a, "zebrafish spawning") == [item.pk]
    new_model(True)
    assert _embedding_hits(client_a, "zebrafish spawning") == []  # its vector is the old model's
    from apps.search.engine import search

    hybrid = search(
        reader=client_a.reader,
        query="zebrafish spawning",
        memory_types=["message"],
        method="hybrid",
        limit=10,
        filters={"user_id": "alice"},
        reranker="none",
    )
    assert [hit.instance.pk for hit in hybrid] == [item.pk]  # keywords still find it


def test_reembed_stages_while_the_old_vectors_serve_then_switches_everything_at_once(
    client_a, add_messages, new_model, fake_openai
):
    items = {
        memory_type: make(client_a, "alice", f"zebrafish {memory_type} notes", add_messages)
        for memory_type, make in MAKERS.items()
    }
    more = MAKERS["message"](client_a, "alice", "a second zebrafish tank", add_messages)
    for item in items.values():
        item.refresh_from_db()
    old_vectors = {memory_type: list(item.embedding) for memory_type, item in items.items()}

    new_model(True)
    staged = _reembed("--stage-only")
    assert all(staged["embedded"][memory_type] >= 1 for memory_type in items) and staged["reembedded"] == {}
    assert StagedEmbedding.objects.filter(model=NEW).count() == sum(staged["embedded"].values())
    calls = _embedding_calls(fake_openai)
    new_model(False)  # the servers still run the old model: nothing they search has changed
    for memory_type, item in items.items():
        item.refresh_from_db()
        assert item.embedding_model == OLD and list(item.embedding) == old_vectors[memory_type], memory_type
    assert set(_embedding_hits(client_a, "zebrafish")) == {items["message"].pk, more.pk}

    # Resumable: a second pass embeds only what changed since.
    Message.objects.filter(pk=more.pk).update(content="a second zebrafish tank, now heated")
    new_model(True)
    again = _reembed("--stage-only")
    assert again["embedded"] == {**{memory_type: 0 for memory_type in items}, "message": 1}
    assert _embedding_calls(fake_openai) == calls + 1

    switched = _reembed()
    assert switched["embedded"] == {memory_type: 0 for memory_type in items}
    assert switched["reembedded"]["message"] == 2 and all(switched["reembedded"][t] >= 1 for t in items)
    assert set(switched["remaining"].values()) == {0} and not StagedEmbedding.objects.exists()
    more.refresh_from_db()
    (expected,) = embed_texts([SOURCES["message"].embedding_text(more)])
    assert more.embedding_model == NEW and list(more.embedding) == pytest.approx(expected, abs=1e-6)
    assert set(_embedding_hits(client_a, "zebrafish")) == {items["message"].pk, more.pk}
    new_model(False)
    assert _embedding_hits(client_a, "zebrafish") == []  # never the new vectors against an old-model query


def test_an_interrupted_stage_resumes_where_it_stopped(client_a, add_messages, new_model, fake_openai):
    for number in range(3):
        MAKERS["message"](client_a, "alice", f"zebrafish note {number}", add_messages)
    new_model(True)
    stage = source_stage(source=SOURCES["message"], batch_size=1)
    assert next(stage) == (1, 3, 1)
    stage.close()  # interrupted after one batch
    assert _reembed("--type", "message")["embedded"] == {"message": 2}
    assert _embedding_calls(fake_openai) == 3
    assert Message.objects.filter(embedding_model=NEW).count() == 3
