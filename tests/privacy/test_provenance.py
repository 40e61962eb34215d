"""Provenance decides what goes (issue 26): distinctive words of one client are planted in every
derivation the platform has (two clients of one scope writing the same conversation and task
sessions, experiences, a shared skill and its versions, memories, entities and profile pages, the
neighbours' stored context, a task's result); erasing the client, erasing the user or deleting a
turn leaves none of them in any column of any table, and no other party's turn goes."""

import pytest
from asgiref.sync import async_to_sync
from memory_platform_client.contract import TOOLS_BY_NAME

from apps.conversations.models import Message, Session
from apps.mcp_server.backend import PlatformBackend
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.provenance import session_delete
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.profiles.models import Mention
from apps.search.engine import search
from apps.search.registry import METHODS, SOURCES
from apps.skills.models import Skill
from harness.provenance_world import URSULA, VICTOR, build, residue
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

WORD = "vorpalwick"  # only client two ever writes it
TURN_WORD = "quillfeathzk"  # only one of client two's turns holds it


def turns_of(client) -> set:
    return set(Message.objects.filter(created_by=client).values_list("pk", "content", "session_id"))


@pytest.fixture
def shared(client_a, settings):
    """Client one (client_a, may erase) and client two write the same sessions of one scope."""
    settings.LLM_PROVIDER = "rules"
    settings.SKILL_REVIEW_MODE = "auto"
    settings.SKILL_SHARE_MIN_USERS = (
        1  # every lesson reaches the shared skill (tests/skills/test_trust.py covers trust)
    )
    settings.EXTRACTION_DEBOUNCE_SECONDS = 0
    one, two = client_a, ClientFactory(organization=client_a.organization, name="agent-two")
    one.can_erase = True
    one.save(update_fields=["can_erase"])
    world = build(one, two, word=WORD, turn_word=TURN_WORD)
    return world.one, world.two


def erase(api_client, url) -> ErasureRequest:
    body = api_client.delete(url).json()
    assert task_execute(task_id=body["task_id"], worker="test") == "succeeded"
    return ErasureRequest.objects.get(pk=body["erasure_id"])


def found_by_search(client, query) -> list:
    hits = []
    for memory_type in SOURCES:
        for method in METHODS:
            hits += search(
                reader=client.reader, query=query, memory_types=[memory_type], method=method, limit=50, filters={}
            )
    return [hit for hit in hits if WORD in str(hit.source.to_item(hit.instance)).lower()]


def test_the_planted_words_reach_every_derivation_before_anything_is_erased(shared):
    before = residue(WORD)
    assert {
        "conversations.Message.content",
        "conversations.Message.context",
        "conversations.Message.search_vector",
        "skills.SkillExperience.content",
        "skills.Skill.instructions",
        "skills.SkillVersion.snapshot",
        "memories.SemanticMemory.summary",
        "memories.SemanticMemoryChange.new_value",
        "profiles.Entity.name",
        "profiles.Profile.name",
        "profiles.ProfileRevision.markdown",
        "pipeline.MemoryTask.result",
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
    assert shared_skill.supporters == [Session.objects.get(session_id="task-one").end_user_id]
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
    async_to_sync(PlatformBackend(client=client, executor=None).call)(
        TOOLS_BY_NAME["delete_memory"], {"memory_type": "message", "memory_id": str(message.pk)}
    )


@pytest.mark.parametrize("delete", [_delete_over_rest, _delete_over_mcp], ids=["rest", "mcp"])
def test_deleting_one_turn_takes_its_words_out_of_its_neighbours_and_what_was_derived(shared, delete):
    one, two = shared
    turn = Message.objects.get(content__contains=TURN_WORD)
    neighbours = Message.objects.filter(session=turn.session, seq__in=[turn.seq - 1, turn.seq + 1])
    assert all(TURN_WORD in neighbour.context for neighbour in neighbours)
    sentence = "the quillfeathzk festival was lovely"
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
