import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Message
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.providers.embeddings import embed_texts
from apps.search.registry import SOURCES
from apps.skills.models import SkillExperience
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
    task_execute(task_id=MemoryTask.objects.get(task_type="distill_session", payload__session=str(session.pk)).pk, worker="test")
    experience = SkillExperience.objects.filter(session=session).first()
    assert experience is not None
    for memory_type, item in (("message", message), ("procedural", skill), ("experience", experience)):
        item.refresh_from_db()
        (vector,) = embed_texts([SOURCES[memory_type].embedding_text(item)])
        assert list(item.embedding) == pytest.approx(vector, abs=1e-6), memory_type


def test_reembed_switches_every_stale_vector_to_the_current_model(client_a, add_messages, settings):
    items = {memory_type: make(client_a, "alice", f"zebrafish {memory_type} notes", add_messages) for memory_type, make in MAKERS.items()}
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
