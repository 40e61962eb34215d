"""A seeded organisation for erasure tests: two users and two clients with data in every table,
stored through the real services (ingest, pipeline handlers, distillation, evolution, memories)."""

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest

from apps.conversations.models import Message, Session
from apps.memories.services.memories import memory_create, memory_update
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.profiles.models import Entity
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.providers.embeddings import embed_texts
from apps.providers.models import LLMUsage
from apps.skills.models import Skill
from apps.skills.services.evolve.run import skills_evolve
from apps.skills.services.skills import skill_create
from apps.tenancy.models import EndUser
from tests.factories import ClientFactory
from tests.skills.factories import task_session

ALICE, BOB = "alice", "bob"
# Words only the erased user's data contains, so search can tell whether anything of theirs is left.
ALICE_WORD, BOB_WORD = "zanzibar", "reykjavik"
ALICE_REQUEST = "Please book me a flight to Zanzibar next friday, window seat"
ALICE_ERROR = "Error: seat 1A on the Zanzibar flight is held for passenger Alice Okafor"
BOB_REQUEST = "Please book me a flight to Reykjavik in march for two people"
ALICE_ONLY_REQUEST = "Cancel my Zanzibar hotel booking and refund the deposit please"


def _call(index, tool, arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
        ],
    }


def _result(index, tool, content):
    return {"role": "tool", "tool_call_id": f"c{index}", "name": tool, "content": content}


def tool_messages(request, tools, *, failing_tool=None, error=""):
    """A successful task session; `failing_tool` first fails with `error`, then succeeds on a retry."""
    messages, index = [{"role": "user", "content": request}], 0
    for tool in tools:
        if tool == failing_tool:
            messages += [_call(index, tool, {"seat": "1A"}), _result(index, tool, error)]
            index += 1
        messages += [_call(index, tool, {"seat": "2B"}), _result(index, tool, '{"ok": true}')]
        index += 1
    return messages + [{"role": "assistant", "content": "All done."}]


def run_tasks(**filters) -> list:
    """Runs every due queued task matching the filters through the pipeline; returns their ids."""
    ids = list(MemoryTask.objects.filter(status="queued", **filters).values_list("pk", flat=True))
    for task_id in ids:
        task_execute(task_id=task_id, worker="test")
    return ids


def remember(session, text, *, client_messages=None):
    """An episodic and a semantic memory of the session's user, each with two history rows."""
    sources = list(Message.objects.filter(session=session).values_list("pk", flat=True)[:2])
    created = []
    for memory_type, fields in (
        (
            "episodic",
            {
                "occurred_at": datetime(2024, 5, 7, tzinfo=timezone.utc),
                "summary": text,
                "actor": session.end_user.user_id,
            },
        ),
        ("semantic", {"name": session.end_user.user_id, "summary": text}),
    ):
        (vector,) = embed_texts([text])
        memory = memory_create(
            memory_type=memory_type,
            session=session,
            fields=fields,
            source_message_ids=sources,
            embedding=vector,
            actor="test",
        )
        memory_update(
            memory=memory,
            fields={"summary": f"{text} (confirmed)"},
            source_message_ids=[],
            embedding=vector,
            actor="test",
        )
        created.append(memory)
    return created


@dataclass
class World:
    organization: object
    client_a: object
    client_c: object
    foreign_client: object
    reader: object
    shared_skill: Skill
    alice_only_skill: Skill
    alice_personal_skill: Skill
    ids: dict = field(default_factory=dict)

    def end_user(self, user_id):
        return EndUser.objects.get(organization=self.organization, user_id=user_id)


@pytest.fixture
def world(client_a, foreign_client, add_messages, settings) -> World:
    settings.LLM_PROVIDER = "rules"
    settings.SKILL_REVIEW_MODE = "auto"
    settings.SKILL_SHARE_MIN_USERS = 1  # the shared skill quotes both users (tests/skills/test_trust.py covers trust)
    settings.EXTRACTION_DEBOUNCE_SECONDS = 3600  # extraction tasks stay queued: the erasure must cancel them
    organization = client_a.organization
    for eraser in (client_a, foreign_client):  # erasure is a permission of its own
        eraser.can_erase = True
        eraser.save(update_fields=["can_erase"])
    client_c = ClientFactory(organization=organization, name="agent-c")
    reader = ClientFactory(organization=organization, name="reader", write_scope=None, read_scopes=["default"])

    # Conversations, with an idempotency record each, and memories learned from them.
    add_messages(
        client_a,
        ALICE,
        "chat-1",
        [
            {"role": "user", "content": f"I spent my holidays on the beaches of {ALICE_WORD.title()}"},
            {"role": "assistant", "content": "That sounds lovely."},
        ],
        idempotency_key="alice-add-1",
        request_hash="h1",
    )
    add_messages(
        client_a,
        BOB,
        "chat-1",
        [
            {"role": "user", "content": f"I spent my holidays hiking near {BOB_WORD.title()}"},
            {"role": "assistant", "content": "That sounds cold."},
        ],
        idempotency_key="bob-add-1",
        request_hash="h2",
    )
    add_messages(
        client_c,
        BOB,
        "chat-c",
        [
            {"role": "user", "content": "Agent C noted that bob prefers aisle seats"},
        ],
        idempotency_key="c-add-1",
        request_hash="h3",
    )

    # Task sessions, distilled and evolved: one skill shared by both users, one from Alice alone.
    task_session(
        client_a,
        session_id="task-1",
        user_id=ALICE,
        messages=tool_messages(
            ALICE_REQUEST, ["search_flights", "book_reservation"], failing_tool="search_flights", error=ALICE_ERROR
        ),
    )
    task_session(
        client_a,
        session_id="task-1",
        user_id=BOB,
        messages=tool_messages(BOB_REQUEST, ["search_flights", "book_reservation"]),
    )
    task_session(
        client_a,
        session_id="task-2",
        user_id=ALICE,
        messages=tool_messages(ALICE_ONLY_REQUEST, ["cancel_booking", "issue_refund"]),
    )
    run_tasks(task_type="embed_messages")
    run_tasks(task_type="distill_session")
    while skills_evolve(organization=organization, scope="default")["remaining"]:
        pass
    shared = Skill.objects.get(action_signature=["search_flights", "book_reservation"])
    alice_only = Skill.objects.get(action_signature=["cancel_booking", "issue_refund"])
    alice_personal = skill_create(
        organization=organization,
        scope="default",
        end_user=EndUser.objects.get(organization=organization, user_id=ALICE),
        fields={
            "name": "alice-zanzibar-habits",
            "description": f"How {ALICE_WORD} Alice likes her trips",
            "instructions": "Window seat.",
            "entry_type": "guide",
        },
        actor="test",
        reason="personal",
        status="active",
    )

    for user_id, word, client in ((ALICE, ALICE_WORD, client_a), (BOB, BOB_WORD, client_a), (BOB, "aisle", client_c)):
        session = Session.objects.get(
            organization=organization, end_user__user_id=user_id, client=client, session_tag="conversation"
        )
        remember(session, f"{user_id} talked about {word}")

    # Compiled memory: entities and profile pages of every conversation, quoting the turns and memories.
    for session in Session.objects.filter(organization=organization, session_tag="conversation"):
        session_project(session=session)
    for entity in Entity.objects.filter(organization=organization):
        profile_compile(entity=entity)

    # Something still waiting for a worker, and an LLM usage row of a finished task of Alice's.
    add_messages(client_a, ALICE, "chat-2", [{"role": "user", "content": f"More about {ALICE_WORD} tomorrow"}])
    alice_distill = MemoryTask.objects.filter(task_type="distill_session", status="succeeded").first()
    LLMUsage.objects.create(organization=organization, task_id=alice_distill.pk, model="rules", purpose="distill")

    # The other organisation has a user of the same name.
    add_messages(foreign_client, ALICE, "chat-1", [{"role": "user", "content": f"Foreign {ALICE_WORD} note"}])

    return World(
        organization=organization,
        client_a=client_a,
        client_c=client_c,
        foreign_client=foreign_client,
        reader=reader,
        shared_skill=shared,
        alice_only_skill=alice_only,
        alice_personal_skill=alice_personal,
    )
