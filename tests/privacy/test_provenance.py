"""Provenance decides what goes (issue 26): distinctive words of one client are planted in every
derivation the platform has (two clients of one scope writing the same conversation and task
sessions, experiences, a shared skill and its versions, memories, entities and profile pages, the
neighbours' stored context, a task's result); erasing the client, erasing the user or deleting a
turn leaves none of them in any column of any table, and no other party's turn goes."""

import pytest
from django.apps import apps
from django.db import connection

from apps.conversations.models import Message, Session
from apps.mcp_server.backend import PlatformBackend
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import memory_create
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.provenance import session_delete
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.profiles.models import Entity, Mention
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.providers.embeddings import embed_texts
from apps.search.engine import search
from apps.search.registry import METHODS, SOURCES
from apps.skills.models import Skill
from apps.skills.services.evolve.run import skills_evolve
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.privacy.conftest import run_tasks, tool_messages

pytestmark = pytest.mark.django_db

WORD = "vorpalwick"  # only client two ever writes it
TURN_WORD = "quillfeather"  # only one of client two's turns holds it
URSULA, VICTOR = "ursula", "victor"


def residue(word: str) -> dict[str, int]:
    """Rows holding `word`, per table and column, over every text-like column of every model (text,
    JSON, arrays, search vectors): a table added later is scanned without changing this test."""
    found = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            for field in model._meta.concrete_fields:
                db_type = (field.db_parameters(connection)["type"] or "").lower()
                if not db_type.startswith(("varchar", "text", "jsonb", "tsvector", "character")) and "[]" not in db_type:
                    continue
                cursor.execute(
                    f'SELECT count(*) FROM "{model._meta.db_table}" WHERE "{field.column}"::text ILIKE %s', [f"%{word}%"]
                )
                count = cursor.fetchone()[0]
                if count:
                    found[f"{model._meta.label}.{field.name}"] = count
    return found


def turns_of(client) -> set:
    return set(Message.objects.filter(created_by=client).values_list("pk", "content", "session_id"))


@pytest.fixture
def shared(client_a, add_messages, settings):
    """Client one (client_a, may erase) and client two write the same sessions of one scope."""
    settings.LLM_PROVIDER = "rules"
    settings.SKILL_REVIEW_MODE = "auto"
    settings.EXTRACTION_DEBOUNCE_SECONDS = 0
    one, two = client_a, ClientFactory(organization=client_a.organization, name="agent-two")
    one.can_erase = True
    one.save(update_fields=["can_erase"])

    # A conversation client one opened and both wrote; one client two opened and client one continued.
    add_messages(one, URSULA, "chat-shared", [{"role": "user", "content": "Hello, I want to plan a trip next spring."}])
    add_messages(two, URSULA, "chat-shared", [
        {"role": "user", "content": f"My cousin {WORD.title()} lives near the harbour and grows {WORD} berries."},
    ])
    add_messages(one, URSULA, "chat-shared", [{"role": "assistant", "content": "That sounds nice, tell me more."}])
    add_messages(two, URSULA, "chat-shared", [
        {"role": "user", "content": f"I visited {WORD.title()} again, the {TURN_WORD} festival was lovely in May."},
    ])
    add_messages(one, URSULA, "chat-shared", [{"role": "assistant", "content": "May is a fine month for festivals."}])
    add_messages(two, URSULA, "chat-two", [{"role": "user", "content": f"Remind me to call {WORD.title()} on Sunday."}])
    add_messages(one, URSULA, "chat-two", [{"role": "assistant", "content": "I will remind you on Sunday."}])

    # Task sessions: client one asks, client two's tools answer (one error names the word); client one
    # alone teaches the same workflow for Victor; client two alone teaches another.
    request = tool_messages("Please book a flight to Lisbon for the conference", ["search_flights", "book_reservation"],
                            failing_tool="search_flights", error=f"Error: fare class {WORD} is closed for this flight")
    add_messages(one, URSULA, "task-shared", request[:1], session_tag="task")
    add_messages(two, URSULA, "task-shared", request[1:], session_tag="task", outcome="success", seal=True)
    add_messages(one, VICTOR, "task-one", tool_messages("Please book a flight to Oslo for the conference",
                 ["search_flights", "book_reservation"]), session_tag="task", outcome="success", seal=True)
    add_messages(two, URSULA, "task-two", tool_messages(f"Cancel the {WORD} hotel booking and refund the deposit",
                 ["cancel_booking", "issue_refund"]), session_tag="task", outcome="success", seal=True)
    run_tasks(task_type="embed_messages")
    run_tasks(task_type="extract_memories")
    run_tasks(task_type="distill_session")
    while skills_evolve(organization=one.organization, scope="default")["remaining"]:
        pass

    # Memories: one learned from both clients' turns, one from client one's turn alone.
    chat = Session.objects.get(session_id="chat-shared")
    first, second = Message.objects.filter(session=chat).order_by("seq")[:2]
    for memory_type, fields, sources in (
        ("semantic", {"name": "Ursula", "summary": f"Ursula's cousin {WORD.title()} grows {WORD} berries"}, [first.pk, second.pk]),
        ("episodic", {"occurred_at": first.occurred_at, "summary": "Ursula plans a trip next spring", "actor": "Ursula"}, [first.pk]),
    ):
        memory_create(memory_type=memory_type, session=chat, fields=fields, source_message_ids=sources,
                      embedding=embed_texts([fields["summary"]])[0], actor="test")
    for session in Session.objects.filter(session_tag="conversation"):
        session_project(session=session)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    # What an LLM extraction's result quotes when it rejects an operation.
    MemoryTask.objects.filter(task_type="extract_memories", payload__session=str(chat.pk)).update(
        result={"rejected": [f"semantic: '{WORD} berries' has no subject"], "turns": 5}
    )
    return one, two


def erase(api_client, url) -> ErasureRequest:
    body = api_client.delete(url).json()
    assert task_execute(task_id=body["task_id"], worker="test") == "succeeded"
    return ErasureRequest.objects.get(pk=body["erasure_id"])


def found_by_search(client, query) -> list:
    hits = []
    for memory_type in SOURCES:
        for method in METHODS:
            hits += search(reader=client.reader, query=query, memory_types=[memory_type], method=method, limit=50, filters={})
    return [hit for hit in hits if WORD in str(hit.source.to_item(hit.instance)).lower()]


def test_the_planted_words_reach_every_derivation_before_anything_is_erased(shared):
    before = residue(WORD)
    assert {
        "conversations.Message.content", "conversations.Message.context", "conversations.Message.search_vector",
        "skills.SkillExperience.content", "skills.Skill.instructions", "skills.SkillVersion.snapshot",
        "memories.SemanticMemory.summary", "memories.SemanticMemoryChange.new_value", "profiles.Entity.name",
        "profiles.Profile.name", "profiles.ProfileRevision.markdown", "pipeline.MemoryTask.result",
    } <= set(before), before
    one, two = shared
    # Verification finds the client's words where provenance alone would not look.
    subject = subject_resolve(organization=one.organization, kind="client", subject_id=str(two.pk))
    text = subject_verify(subject=subject, include_redis=False)["text"]
    assert text["fingerprint"] > 0 and "conversations.Message.context" in text["tables"], text


def test_a_client_erasure_leaves_none_of_its_words_and_deletes_no_other_clients_turn(shared):
    one, two = shared
    kept_turns = turns_of(one)
    opened_by_two = Session.objects.get(session_id="chat-two")
    plain_memory = EpisodicMemory.objects.get(summary="Ursula plans a trip next spring")
    assert found_by_search(one, WORD)

    erasure = erase(api_for(one), f"/api/v1/clients/{two.pk}/memories")

    assert residue(WORD) == {}
    assert erasure.residual["total"] == 0 and erasure.residual["text"]["fingerprint"] > 0
    assert turns_of(one) == kept_turns  # other parties' rows deleted: 0
    opened_by_two.refresh_from_db()
    assert opened_by_two.client_id == one.pk and opened_by_two.message_count == 1
    assert EpisodicMemory.objects.filter(pk=plain_memory.pk).exists()
    assert found_by_search(one, WORD) == []
    # The shared skill keeps what Victor's session taught, back in review; client two's own one is gone.
    shared_skill = Skill.objects.get(action_signature=["search_flights", "book_reservation"])
    assert shared_skill.status == "pending_review" and "Oslo" in str(shared_skill.triggers)
    assert not Skill.objects.filter(action_signature=["cancel_booking", "issue_refund"]).exists()
    # The turn the deleted memory also cited is learned from again.
    assert Message.objects.filter(session__session_id="chat-shared", seq=1, learned_at__isnull=True).exists()


def test_a_user_erasure_leaves_none_of_their_words_and_no_other_users_rows_go(shared):
    one, _ = shared
    victor = set(Message.objects.filter(end_user__user_id=VICTOR).values_list("pk", "content", "context"))
    assert victor

    erasure = erase(api_for(one), f"/api/v1/users/{URSULA}/memories")

    assert residue(WORD) == {}
    # The audit trail names its subject (and holds no content): the only place the user id is left.
    assert residue(URSULA) == {"privacy.ErasureRequest.subject_id": 1}
    assert erasure.residual["total"] == 0
    assert set(Message.objects.filter(end_user__user_id=VICTOR).values_list("pk", "content", "context")) == victor


def _delete_over_rest(client, message):
    assert api_for(client).delete(f"/api/v1/memory/message/{message.pk}").status_code == 204


def _delete_over_mcp(client, message):
    PlatformBackend(client=client, executor=None)._delete_memory(memory_type="message", memory_id=str(message.pk))


@pytest.mark.parametrize("delete", [_delete_over_rest, _delete_over_mcp], ids=["rest", "mcp"])
def test_deleting_one_turn_takes_its_words_out_of_its_neighbours_and_what_was_derived(shared, delete):
    one, two = shared
    turn = Message.objects.get(content__contains=TURN_WORD)
    neighbours = Message.objects.filter(session=turn.session, seq__in=[turn.seq - 1, turn.seq + 1])
    assert all(TURN_WORD in neighbour.context for neighbour in neighbours)
    sentence = "the quillfeather festival was lovely"
    assert search(reader=one.reader, query=sentence, memory_types=["message"], method="bm25", limit=10, filters={})
    others = set(Message.objects.exclude(pk=turn.pk).values_list("pk", "content"))

    delete(two, turn)

    assert residue(TURN_WORD) == {}
    assert set(Message.objects.values_list("pk", "content")) == others
    for method in METHODS:
        found = search(reader=one.reader, query=sentence, memory_types=["message"], method=method, limit=10, filters={})
        assert not [hit for hit in found if TURN_WORD in str(hit.source.to_item(hit.instance))], method


def test_deleting_a_session_takes_what_was_derived_from_it(shared):
    chat = Session.objects.get(session_id="chat-shared")
    turn_ids = list(Message.objects.filter(session=chat).values_list("pk", flat=True))
    counts = session_delete(session=chat)
    assert counts["conversations.Session"] == 1 and counts["conversations.Message"] == len(turn_ids) == 5
    assert not SemanticMemory.objects.exists() and not EpisodicMemory.objects.exists()
    assert not Mention.objects.filter(item_id__in=turn_ids).exists()
    assert not Session.objects.filter(pk=chat.pk).exists()


def test_an_erasure_fails_verification_when_a_copy_is_left_where_provenance_does_not_reach(shared):
    """A person pasted client two's sentence into a skill: no lineage leads there, the text scan does,
    and the erasure is not reported done."""
    one, two = shared
    Skill.objects.filter(action_signature=["search_flights", "book_reservation"]).update(
        description=f"Ursula said: I visited {WORD.title()} again, the {TURN_WORD} festival was lovely in May."
    )
    body = api_for(one).delete(f"/api/v1/clients/{two.pk}/memories").json()
    task_execute(task_id=body["task_id"], worker="test")

    erasure = ErasureRequest.objects.get(pk=body["erasure_id"])
    assert erasure.status == "failed" and erasure.error == "ErasureIncomplete"
    assert erasure.residual["text"]["tables"]["skills.Skill.description"] == 1
    assert erasure.residual["tables"]["conversations.Message"] == 0
