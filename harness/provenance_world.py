"""Two clients of one scope writing the same sessions, with one client's distinctive words planted in
every derivation the platform has. Built through the real services (ingest, the pipeline's handlers,
distillation, evolution, memories, projection, compilation); used by tests/privacy/test_provenance.py
and by `python -m bench privacy_erasure`."""

import json
from dataclasses import dataclass

from django.db import connection

URSULA, VICTOR = "ursula", "victor"


@dataclass
class World:
    organization: object
    one: object  # the client that stays
    two: object  # the client whose words are planted
    word: str  # only client two ever writes it (a name, so it becomes an entity)
    turn_word: str  # only one of client two's turns holds it
    sentence: str  # words of that turn, for searching it


def _call(index, tool, arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"c{index}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}},
        ],
    }


def tool_messages(request, tools, *, failing_tool=None, error=""):
    """A successful task session; `failing_tool` first fails with `error`, then succeeds on a retry."""
    messages, index = [{"role": "user", "content": request}], 0
    for tool in tools:
        if tool == failing_tool:
            messages += [
                _call(index, tool, {"seat": "1A"}),
                {"role": "tool", "tool_call_id": f"c{index}", "name": tool, "content": error},
            ]
            index += 1
        messages += [
            _call(index, tool, {"seat": "2B"}),
            {"role": "tool", "tool_call_id": f"c{index}", "name": tool, "content": '{"ok": true}'},
        ]
        index += 1
    return messages + [{"role": "assistant", "content": "All done."}]


def run_queued(organization, task_type) -> None:
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import task_execute

    for task_id in MemoryTask.objects.filter(
        organization=organization, status="queued", task_type=task_type
    ).values_list("pk", flat=True):
        task_execute(task_id=task_id, worker="provenance-world")


def build(one, two, *, word: str = "vorpalwick", turn_word: str = "quillfeathzk") -> World:
    """Needs LLM_PROVIDER=rules, SKILL_REVIEW_MODE=auto, SKILL_SHARE_MIN_USERS=1 (so every lesson
    reaches the shared skill) and EXTRACTION_DEBOUNCE_SECONDS=0."""
    from apps.conversations.models import Message, Session
    from apps.conversations.services.ingest import messages_ingest
    from apps.memories.services.memories import memory_create
    from apps.pipeline.models import MemoryTask
    from apps.profiles.models import Entity
    from apps.profiles.services.compile import profile_compile
    from apps.profiles.services.entities import session_project
    from apps.providers.embeddings import embed_texts
    from apps.skills.services.evolve.run import skills_evolve

    organization = one.organization
    name = word.title()

    def add(client, user_id, session_id, messages, **options):
        messages_ingest(client=client, user_id=user_id, session_id=session_id, messages=messages, **options)

    # A conversation client one opened and both wrote; one client two opened and client one continued.
    add(one, URSULA, "chat-shared", [{"role": "user", "content": "Hello, I want to plan a trip next spring."}])
    add(
        two,
        URSULA,
        "chat-shared",
        [
            {"role": "user", "content": f"My cousin {name} lives near the harbour and grows {word} berries."},
        ],
    )
    add(one, URSULA, "chat-shared", [{"role": "assistant", "content": "That sounds nice, tell me more."}])
    add(
        two,
        URSULA,
        "chat-shared",
        [
            {"role": "user", "content": f"I visited {name} again, the {turn_word} festival was lovely in May."},
        ],
    )
    add(one, URSULA, "chat-shared", [{"role": "assistant", "content": "May is a fine month for festivals."}])
    add(two, URSULA, "chat-two", [{"role": "user", "content": f"Remind me to call {name} on Sunday."}])
    add(one, URSULA, "chat-two", [{"role": "assistant", "content": "I will remind you on Sunday."}])

    # Task sessions: client one asks, client two's tools answer (one error names the word); client one
    # alone teaches the same workflow for Victor; client two alone teaches another.
    request = tool_messages(
        "Please book a flight to Lisbon for the conference",
        ["search_flights", "book_reservation"],
        failing_tool="search_flights",
        error=f"Error: fare class {word} is closed for this flight",
    )
    add(one, URSULA, "task-shared", request[:1], session_tag="task")
    add(two, URSULA, "task-shared", request[1:], session_tag="task", outcome="success", seal=True)
    add(
        one,
        VICTOR,
        "task-one",
        tool_messages("Please book a flight to Oslo for the conference", ["search_flights", "book_reservation"]),
        session_tag="task",
        outcome="success",
        seal=True,
    )
    add(
        two,
        URSULA,
        "task-two",
        tool_messages(f"Cancel the {word} hotel booking and refund the deposit", ["cancel_booking", "issue_refund"]),
        session_tag="task",
        outcome="success",
        seal=True,
    )
    for task_type in ("embed_messages", "extract_memories", "distill_session"):
        run_queued(organization, task_type)
    while skills_evolve(organization=organization, scope=one.write_scope)["remaining"]:
        pass

    # Memories: one learned from both clients' turns, one from client one's turn alone.
    chat = Session.objects.get(organization=organization, session_id="chat-shared")
    first, second = Message.objects.filter(session=chat).order_by("seq")[:2]
    for memory_type, fields, sources in (
        (
            "semantic",
            {"name": "Ursula", "summary": f"Ursula's cousin {name} grows {word} berries"},
            [first.pk, second.pk],
        ),
        (
            "episodic",
            {"occurred_at": first.occurred_at, "summary": "Ursula plans a trip next spring", "actor": "Ursula"},
            [first.pk],
        ),
    ):
        memory_create(
            memory_type=memory_type,
            session=chat,
            fields=fields,
            source_message_ids=sources,
            embedding=embed_texts([fields["summary"]])[0],
            actor="provenance-world",
        )
    for session in Session.objects.filter(organization=organization, session_tag="conversation"):
        session_project(session=session)
    for entity in Entity.objects.filter(organization=organization):
        profile_compile(entity=entity)
    # What an LLM extraction's result quotes when it rejects an operation.
    MemoryTask.objects.filter(task_type="extract_memories", payload__session=str(chat.pk)).update(
        result={"rejected": [f"semantic: '{word} berries' has no subject"], "turns": 5}
    )
    return World(
        organization=organization,
        one=one,
        two=two,
        word=word,
        turn_word=turn_word,
        sentence=f"the {turn_word} festival was lovely",
    )


def residue(word: str, *, only=None) -> dict[str, int]:
    """Rows holding `word`, per table and column, over every text-like column of every model (text,
    JSON, arrays, search vectors): a table added later is scanned without changing anything here."""
    from django.apps import apps

    found = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            for field in model._meta.concrete_fields:
                db_type = (field.db_parameters(connection)["type"] or "").lower()
                if (
                    not db_type.startswith(("varchar", "text", "jsonb", "tsvector", "character"))
                    and "[]" not in db_type
                ):
                    continue
                label = f"{model._meta.label}.{field.name}"
                if only is not None and label not in only:
                    continue
                cursor.execute(
                    f'SELECT count(*) FROM "{model._meta.db_table}" WHERE "{field.column}"::text ILIKE %s',
                    [f"%{word}%"],
                )
                count = cursor.fetchone()[0]
                if count:
                    found[label] = count
    return found
