"""Extraction of conversation sessions: routing, the offline date pass, and the LLM extractor
through the fake OpenAI server (adds, updates with history, soft deletes, bad answers, faults)."""

import re
import threading
import uuid
from datetime import datetime, timezone

import pytest
from django.db import connection
from django.utils import timezone as django_timezone

from apps.conversations.models import Message, Session
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.memories.services.extract import EXTRACT_LOCKS
from apps.pipeline.locks import advisory_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.providers.models import LLMUsage
from apps.providers.tokens import prompt_tokens
from apps.search.engine import search
from tests.factories import OrganizationFactory
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db

MAY_8 = "2023-05-08T13:56:00+00:00"
TURNS = [
    {
        "role": "user",
        "name": "Caroline",
        "content": "I went to a LGBTQ support group yesterday and it was so powerful.",
        "occurred_at": MAY_8,
        "metadata": {"dia_id": "D1:3"},
    },
    {
        "role": "assistant",
        "name": "Melanie",
        "content": "That's great! I painted a lake sunrise last year.",
        "occurred_at": MAY_8,
    },
    {
        "role": "user",
        "name": "Caroline",
        "content": "I'm planning to move back to Sweden next month.",
        "occurred_at": MAY_8,
    },
]


def converse(client, add_messages, messages=TURNS, *, user_id="caroline", session_id="c1"):
    add_messages(client, user_id=user_id, session_id=session_id, messages=messages, session_tag="conversation")
    return Session.objects.get(organization=client.organization, end_user__user_id=user_id, session_id=session_id)


def extraction_task(session) -> MemoryTask:
    return MemoryTask.objects.filter(task_type="extract_memories", payload={"session": str(session.pk)}).latest(
        "created_at"
    )


def run_extraction(session) -> MemoryTask:
    """Runs the session's pending extraction now (past its debounce), as a worker would."""
    task = extraction_task(session)
    MemoryTask.objects.filter(pk=task.pk).update(run_after=django_timezone.now())
    task_execute(task_id=task.pk, worker="test")
    task.refresh_from_db()
    return task


def run_embedding(session) -> None:
    for task in MemoryTask.objects.filter(
        task_type="embed_messages", payload__session=str(session.pk), status="queued"
    ):
        task_execute(task_id=task.pk, worker="test")


def messages_of(session) -> list[Message]:
    return list(Message.objects.filter(session=session).order_by("seq"))


# Routing --------------------------------------------------------------------------------------


def test_a_conversation_add_enqueues_one_debounced_extraction_and_never_a_distillation(
    client_a, add_messages, settings
):
    settings.EXTRACTION_DEBOUNCE_SECONDS = 30
    first = add_messages(client_a, user_id="caroline", session_id="c1", messages=TURNS[:1], session_tag="conversation")
    extractions = MemoryTask.objects.filter(task_type="extract_memories")
    assert (extractions.get().run_after - extractions.get().created_at).total_seconds() >= 29, "open: more may come"
    second = add_messages(
        client_a, user_id="caroline", session_id="c1", messages=TURNS[1:], session_tag="conversation", seal=True
    )
    session = Session.objects.get(session_id="c1")
    assert extractions.count() == 1  # debounced: the second add found the pending one
    task = extractions.get()
    assert task.payload == {"session": str(session.pk)} and task.idempotency_key == f"extract:{session.pk}"
    assert task.run_after <= django_timezone.now(), "sealed: nothing more will join it, so it is due at once"
    assert str(task.pk) in first["task_ids"] and str(task.pk) in second["task_ids"]
    assert session.status == "sealed"
    assert not MemoryTask.objects.filter(task_type="distill_session").exists()


def test_a_task_session_never_gets_an_extraction_task(client_a, add_messages):
    add_messages(client_a, user_id="caroline", session_id="t1", messages=TURNS, session_tag="task")
    add_messages(client_a, user_id="caroline", session_id="t1", messages=TURNS[:1], session_tag="task", seal=True)
    assert not MemoryTask.objects.filter(task_type="extract_memories").exists()
    assert MemoryTask.objects.filter(task_type="distill_session").count() == 1  # the routing did run


def test_an_extraction_task_for_a_task_session_is_skipped_and_learns_nothing(client_a, add_messages, rules):
    from apps.memories.handlers import handle_extract_memories

    add_messages(client_a, user_id="caroline", session_id="t1", messages=TURNS, session_tag="task")
    session = Session.objects.get(session_id="t1")
    result = handle_extract_memories(
        MemoryTask(payload={"session": str(session.pk)}, organization=client_a.organization)
    )
    assert "task session is not extracted" in result["skipped"]
    assert not Message.objects.filter(session=session, learned_at__isnull=False).exists()
    gone = handle_extract_memories(
        MemoryTask(payload={"session": str(uuid.uuid4())}, organization=client_a.organization)
    )
    assert gone["skipped"] == "session no longer exists"


# Offline: the temporal normaliser only ----------------------------------------------------------


def test_rules_mode_stores_resolved_dates_in_the_metadata_and_creates_no_memories(client_a, add_messages, rules):
    session = converse(client_a, add_messages)
    task = run_extraction(session)

    assert task.status == "succeeded"
    assert task.result["extractor"] == "rules"
    assert task.result["turns"] == 3 and task.result["dates_resolved"] == 3
    first, second, third = messages_of(session)
    assert first.metadata == {
        "dia_id": "D1:3",  # what the caller sent stays
        "resolved_date": "2023-05-07",
        "date_end": "2023-05-07",
        "date_granularity": "day",
        "date_expression": "yesterday",
        "resolved_dates": [
            {
                "resolved_date": "2023-05-07",
                "date_end": "2023-05-07",
                "date_granularity": "day",
                "date_expression": "yesterday",
                "text": "7 May 2023",
            }
        ],
    }
    assert (second.metadata["resolved_date"], second.metadata["date_granularity"]) == ("2022-01-01", "year")
    assert (third.metadata["resolved_date"], third.metadata["date_granularity"]) == ("2023-06-01", "month")
    assert all(message.learned_at is not None for message in (first, second, third))
    session.refresh_from_db()
    assert session.extracted_at is not None
    assert EpisodicMemory.objects.count() == SemanticMemory.objects.count() == 0
    assert not LLMUsage.objects.exists()


def test_only_new_turns_are_extracted_and_a_rerun_does_nothing(client_a, add_messages, rules):
    from apps.memories.handlers import handle_extract_memories

    session = converse(client_a, add_messages)
    run_extraction(session)
    add_messages(
        client_a,
        user_id="caroline",
        session_id="c1",
        messages=[
            {"role": "user", "content": "Two days ago I adopted a dog.", "occurred_at": "2023-06-01T10:00:00+00:00"},
            {"role": "assistant", "content": "Lovely!", "occurred_at": "2023-06-01T10:00:00+00:00"},
        ],
    )
    task = run_extraction(session)
    assert (task.result["turns"], task.result["dates_resolved"]) == (2, 1)
    assert messages_of(session)[3].metadata["resolved_date"] == "2023-05-30"
    assert handle_extract_memories(task)["turns"] == 0


def test_resolved_dates_become_keyword_searchable_whichever_handler_runs_first(client_a, add_messages, rules):
    early = converse(client_a, add_messages, TURNS[:1], user_id="u1", session_id="a")
    late = converse(client_a, add_messages, TURNS[:1], user_id="u2", session_id="b")

    def found(user_id):
        hits = search(
            reader=client_a.reader,
            query="7 May 2023",
            memory_types=["message"],
            method="bm25",
            limit=5,
            filters={"user_id": user_id},
            time_window="off",  # the keywords alone
        )
        return [hit.instance.content for hit in hits]

    assert found("u1") == []
    run_embedding(early)  # indexing dates the new turns itself
    assert found("u1") == [TURNS[0]["content"]]
    run_extraction(early)
    run_extraction(late)  # before its embedding task, which then rewrites the context
    run_embedding(late)
    for user_id in ("u1", "u2"):
        assert found(user_id) == [TURNS[0]["content"]], user_id
    assert Message.objects.get(session=late).context.endswith("\u23f1 7 May 2023")


# With an LLM ------------------------------------------------------------------------------------


def test_the_llm_adds_episodic_and_semantic_memories_with_absolute_dates(client_a, add_messages, fake_openai):
    session = converse(client_a, add_messages)
    fake_openai.add_json(
        {
            "episodic": [
                {
                    "operation": "add",
                    "occurred_at": "2023-05-07",
                    "actor": "Caroline",
                    "event_type": "support group",
                    "summary": "Caroline went to an LGBTQ support group.",
                    "details": "She found it powerful.",
                    "turns": [1],
                },
                # A relative date from the model is resolved against the cited turn's date.
                {
                    "operation": "add",
                    "occurred_at": "last year",
                    "actor": "Melanie",
                    "summary": "Melanie painted a lake sunrise.",
                    "turns": [2],
                },
                # No date at all: the date resolved in the cited turn.
                {
                    "operation": "ADD",
                    "actor": "Caroline",
                    "summary": "Caroline plans to move back to Sweden.",
                    "turns": ["3"],
                },
            ],
            "semantic": [{"operation": "add", "name": "Caroline", "summary": "Caroline is from Sweden.", "turns": [3]}],
        }
    )
    task = run_extraction(session)

    assert task.status == "succeeded", task.error
    assert task.result["episodic"] == {"added": 3, "updated": 0, "deleted": 0, "unchanged": 0}
    assert task.result["semantic"]["added"] == 1 and task.result["rejected"] == []
    first, second, third = messages_of(session)
    support, painting, move = (
        EpisodicMemory.objects.get(summary__startswith=text) for text in ("Caroline went", "Melanie", "Caroline plans")
    )
    assert support.occurred_at == datetime(2023, 5, 7, tzinfo=timezone.utc) and support.time_granularity == "day"
    assert (painting.occurred_at, painting.time_granularity) == (datetime(2022, 1, 1, tzinfo=timezone.utc), "year")
    assert (move.occurred_at, move.time_granularity) == (datetime(2023, 6, 1, tzinfo=timezone.utc), "month")
    assert support.source_message_ids == [first.pk] and move.source_message_ids == [third.pk]
    assert (support.organization, support.scope, support.end_user, support.created_by) == (
        client_a.organization,
        "default",
        session.end_user,
        client_a,
    )
    assert support.embedding is not None and support.embedding_model == "hash-384"
    fact = SemanticMemory.objects.get()
    assert (fact.name, fact.source, fact.source_message_ids) == (
        "Caroline",
        "conversation c1 on 2023-05-08",
        [third.pk],
    )
    (change,) = support.history.all()
    assert (change.operation, change.previous_value, change.actor, change.task_id) == (
        "add",
        None,
        "extraction:llm:fake-model",
        task.pk,
    )
    assert change.new_value["occurred_at"] == "2023-05-07T00:00:00+00:00"
    # The dates are resolved in the metadata as offline, and the turns are marked learned from.
    assert first.metadata["resolved_date"] == "2023-05-07" and first.learned_at is not None
    usage = LLMUsage.objects.get()
    assert (usage.purpose, usage.task_id) == ("extract_memories", task.pk)

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert "[1] 2023-05-08 13:56 Caroline (user): I went to a LGBTQ support group yesterday" in prompt
    assert "<<yesterday = 7 May 2023>>" in prompt and "<<next month = June 2023>>" in prompt
    assert "Existing episodic memories:\n(none)" in prompt


@pytest.mark.parametrize("refuse_schema", [False, True])
def test_a_strict_answer_with_nulls_is_applied_through_the_schema_or_its_json_object_fallback(
    client_a, add_messages, fake_openai, refuse_schema
):
    session = converse(client_a, add_messages)
    fake_openai.refuse_json_schema = refuse_schema
    empty = {"id": None, "details": None, "reason": None}
    fake_openai.add_json(
        {
            "episodic": [
                {
                    "operation": "add",
                    "turns": [1],
                    "summary": "Caroline went to a support group.",
                    "occurred_at": None,
                    "time_granularity": None,
                    "actor": "Caroline",
                    "event_type": None,
                    **empty,
                }
            ],
            "semantic": [],
        }
    )
    task = run_extraction(session)

    assert task.status == "succeeded" and task.result["episodic"]["added"] == 1 and task.result["rejected"] == []
    memory = EpisodicMemory.objects.get()
    assert memory.occurred_at == datetime(2023, 5, 7, tzinfo=timezone.utc)  # "yesterday" in the cited turn
    formats = [request["response_format"] for request in fake_openai.chat_requests()]
    assert [item["type"] for item in formats] == (["json_schema", "json_object"] if refuse_schema else ["json_schema"])
    assert formats[0]["json_schema"]["name"] == "ExtractionAnswer" and formats[0]["json_schema"]["strict"] is True


def test_the_llm_updates_with_history_soft_deletes_and_sees_only_this_users_memories(
    client_a, add_messages, fake_openai
):
    organization = client_a.organization
    group = episodic(organization, "default", "caroline", "Caroline went to an LGBTQ support group.", actor="Caroline")
    sweden = semantic(
        organization, "default", "caroline", "Caroline", "Caroline wants to stay in the US and never move to Sweden."
    )
    repeated = semantic(organization, "default", "caroline", "Melanie", "Melanie painted a lake sunrise.")
    others = episodic(organization, "default", "melanie", "Melanie went to an LGBTQ support group.", actor="Melanie")
    hidden_scope = episodic(
        organization, "team", "caroline", "Caroline went to an LGBTQ support group in another scope."
    )
    session = converse(client_a, add_messages)
    fake_openai.add_json(
        {
            "episodic": [
                {
                    "operation": "update",
                    "id": "E1",
                    "details": "It was powerful.",
                    "occurred_at": "2023-05-07",
                    "turns": [1],
                    "reason": "more detail",
                }
            ],
            "semantic": [
                {
                    "operation": "delete",
                    "id": str(sweden.pk),
                    "reason": "she now plans to move back to Sweden",
                    "turns": [3],
                },
                {"operation": "none", "id": str(repeated.pk)},
            ],
        }
    )
    task = run_extraction(session)
    assert task.status == "succeeded", task.error

    prompt = fake_openai.chat_requests()[0]["messages"][1]["content"]
    assert "[E1] 2023-05-07 (day) Caroline: Caroline went to an LGBTQ support group." in prompt
    assert re.search(r"\[S\d\] Caroline: Caroline wants to stay", prompt) and re.search(
        r"\[S\d\] Melanie: Melanie painted", prompt
    )
    assert "Melanie went to" not in prompt and "another scope" not in prompt

    assert task.result["episodic"] == {"added": 0, "updated": 1, "deleted": 0, "unchanged": 0}
    assert task.result["semantic"] == {"added": 0, "updated": 0, "deleted": 1, "unchanged": 1}
    group.refresh_from_db()
    first = messages_of(session)[0]
    assert group.details == "It was powerful." and group.source_message_ids == [first.pk]
    update = EpisodicMemoryChange.objects.get(memory=group)
    assert update.operation == "update" and update.reason == "more detail"
    assert update.previous_value["details"] == "" and update.new_value["details"] == "It was powerful."
    assert update.new_value["source_message_ids"] == [str(first.pk)]

    sweden.refresh_from_db()
    assert sweden.deleted_at is not None  # soft: the row and its history stay until retention
    deletion = SemanticMemoryChange.objects.get(memory=sweden)
    assert (deletion.operation, deletion.new_value, deletion.reason) == (
        "delete",
        None,
        "she now plans to move back to Sweden",
    )
    assert deletion.previous_value["summary"].startswith("Caroline wants to stay")
    repeated.refresh_from_db()
    assert repeated.deleted_at is None and not repeated.history.exists()
    for untouched in (others, hidden_scope):
        untouched.refresh_from_db()
        assert untouched.details == "" and untouched.deleted_at is None
    # A soft-deleted memory is gone from search and from the next extraction's candidates.
    hits = search(
        reader=client_a.reader,
        query="Sweden",
        memory_types=["semantic"],
        method="bm25",
        limit=10,
        filters={"user_id": "caroline"},
    )
    assert sweden.pk not in {hit.instance.pk for hit in hits}


def test_bad_operations_are_ignored_and_listed_on_the_task_never_applied(client_a, add_messages, fake_openai):
    organization = client_a.organization
    mine = episodic(organization, "default", "caroline", "Caroline went to an LGBTQ support group.")
    theirs = episodic(organization, "default", "melanie", "Melanie went to an LGBTQ support group.")
    foreign = semantic(OrganizationFactory(), "default", "caroline", "Caroline", "A foreign fact about Caroline.")
    session = converse(client_a, add_messages)
    fake_openai.add_json(
        {
            "episodic": [
                {"operation": "merge", "id": "E1", "summary": "x", "turns": [1]},  # unknown operation
                {
                    "operation": "update",
                    "id": str(theirs.pk),
                    "summary": "Hijacked.",
                    "turns": [1],
                },  # another user's id
                {"operation": "delete", "id": "E7"},  # a key that was never shown
                {"operation": "delete", "id": str(uuid.uuid4())},  # an id that exists nowhere
                {"operation": "add", "summary": "Caroline went somewhere.", "turns": [99]},  # cites no new turn
                {"operation": "add", "summary": "", "turns": [1]},  # no summary
                {"operation": "add", "id": "E1", "summary": "An add with an id.", "turns": [1]},
                "not an object",
                {
                    "operation": "update",
                    "id": "E1",
                    "summary": "Caroline went to a support group for LGBTQ people.",
                    "turns": [1],
                },
                {"operation": "delete", "id": "E1"},  # the same memory twice in one answer
            ],
            "semantic": [
                {"operation": "delete", "id": str(foreign.pk)},  # another organisation's id
                {
                    "operation": "update",
                    "id": "E1",
                    "summary": "wrong type",
                    "turns": [1],
                },  # an episodic key for a fact
            ],
            "procedural": [{"operation": "add"}],
        }
    )
    task = run_extraction(session)
    assert task.status == "succeeded", task.error

    reasons = [(entry["memory_type"], entry.get("id"), entry["reason"]) for entry in task.result["rejected"]]
    assert reasons == [
        ("episodic", "E1", "unknown operation 'merge'"),
        ("episodic", str(theirs.pk), f"id '{theirs.pk}' is not among the episodic candidates shown"),
        ("episodic", "E7", "id 'E7' is not among the episodic candidates shown"),
        ("episodic", reasons[3][1], f"id '{reasons[3][1]}' is not among the episodic candidates shown"),
        ("episodic", None, "cites none of the new turns"),
        ("episodic", None, "missing summary"),
        ("episodic", "E1", "an add must not name an id"),
        ("episodic", None, "not an object"),
        ("episodic", "E1", "memory 'E1' is already changed by an earlier operation of this answer"),
        ("semantic", str(foreign.pk), f"id '{foreign.pk}' is not among the semantic candidates shown"),
        ("semantic", "E1", "id 'E1' is not among the semantic candidates shown"),
    ]
    assert task.result["problems"] == ["ignored unknown keys procedural"]
    assert task.result["episodic"] == {"added": 0, "updated": 1, "deleted": 0, "unchanged": 0}
    mine.refresh_from_db()
    theirs.refresh_from_db()
    foreign.refresh_from_db()
    assert mine.summary == "Caroline went to a support group for LGBTQ people." and mine.deleted_at is None
    assert theirs.summary == "Melanie went to an LGBTQ support group." and not theirs.history.exists()
    assert foreign.deleted_at is None and not foreign.history.exists()
    assert EpisodicMemory.objects.count() == 2 and SemanticMemory.objects.count() == 1


@pytest.mark.parametrize(
    "answer", ["I could not find anything.", "[]", '{"episodic": "none"}', '```json\n{"episodic": [\n```']
)
def test_an_unusable_answer_learns_nothing_is_logged_and_still_marks_the_turns(
    client_a, add_messages, fake_openai, answer
):
    session = converse(client_a, add_messages)
    fake_openai.add_text(answer)
    task = run_extraction(session)
    assert task.status == "succeeded"
    assert task.result["problems"] and task.result["turns"] == 3
    assert EpisodicMemory.objects.count() == SemanticMemory.objects.count() == 0
    assert all(message.learned_at is not None for message in messages_of(session))


def test_an_unreachable_llm_fails_the_task_for_a_retry_and_stores_nothing(
    client_a, add_messages, fake_openai, settings
):
    settings.LLM_MAX_RETRIES = 0
    session = converse(client_a, add_messages)
    fake_openai.add_error(503)
    task = run_extraction(session)
    assert task.status == "failed" and "LLMError" in task.error
    assert task.run_after > django_timezone.now()
    first = messages_of(session)[0]
    assert first.learned_at is None and "resolved_date" not in first.metadata
    assert EpisodicMemory.objects.count() == 0
    # The retry succeeds once the provider answers.
    fake_openai.add_json(
        {"episodic": [{"operation": "add", "summary": "Caroline went to a support group.", "turns": [1]}]}
    )
    retried = run_extraction(session)
    assert retried.pk == task.pk and retried.status == "succeeded" and retried.attempts == 2
    assert EpisodicMemory.objects.get().occurred_at == datetime(2023, 5, 7, tzinfo=timezone.utc)


def test_long_sessions_are_extracted_in_batches(client_a, add_messages, fake_openai, settings):
    settings.EXTRACTION_MAX_TURNS = 2
    session = converse(client_a, add_messages)
    fake_openai.add_json(
        {"episodic": [{"operation": "add", "summary": "Caroline went to a support group.", "turns": [1]}]}
    )
    fake_openai.add_json(
        {
            "semantic": [
                {"operation": "add", "name": "Caroline", "summary": "Caroline is moving to Sweden.", "turns": [3, 1]}
            ]
        }
    )  # turn 1 is not in this batch
    task = run_extraction(session)
    assert task.result["turns"] == 3 and len(fake_openai.chat_requests()) == 2
    # The second batch is shown what the first one stored.
    assert "Caroline went to a support group." in fake_openai.chat_requests()[1]["messages"][1]["content"]
    assert SemanticMemory.objects.get().source_message_ids == [messages_of(session)[2].pk]


# The largest conversation of the LOCOMO dev set (counted once from locomo-dev.json): conv-43 has the
# most turns (680) and conv-41 the most text (89,736 characters). This session is as large as both,
# in one session, with turns of varied length, a few very long ones and some non-ASCII text.
LOCOMO_LARGEST_TURNS, LOCOMO_LARGEST_CHARS = 680, 89_736
WORDS = "the painting group hike Sweden café adoption camping pottery concert museum beach naïve 東京 2023".split()


def largest_session_turns() -> list[dict]:
    turns = []
    for index in range(LOCOMO_LARGEST_TURNS):
        length = 9000 if index % 170 == 5 else 40 + (index * 53) % 150
        words = " ".join(WORDS[(index + n) % len(WORDS)] for n in range(length // 4))
        turns.append(
            {
                "role": ("user", "assistant")[index % 2],
                "name": ("Caroline", "Melanie")[index % 2],
                "content": f"Turn {index}: {words}"[:length],
                "occurred_at": MAY_8,
            }
        )
    return turns


@pytest.mark.parametrize("budget", [8000, 2000])
def test_every_extraction_prompt_of_the_largest_locomo_session_fits_the_token_budget(
    client_a, add_messages, fake_openai, settings, budget
):
    settings.LLM_MAX_PROMPT_TOKENS = budget
    turns = largest_session_turns()
    assert sum(len(turn["content"]) for turn in turns) >= LOCOMO_LARGEST_CHARS
    for start in range(0, len(turns), 340):
        add_messages(client_a, user_id="caroline", session_id="big", messages=turns[start : start + 340])
    session = Session.objects.get(session_id="big")
    fake_openai.default_answer = {"episodic": [], "semantic": []}

    task = run_extraction(session)

    assert task.status == "succeeded" and task.result["turns"] == LOCOMO_LARGEST_TURNS
    prompts = [request["messages"] for request in fake_openai.chat_requests()]
    assert max(prompt_tokens(prompt) for prompt in prompts) <= budget
    # Every turn was shown once, in order, and none was cut by the last-resort cut of chat_json.
    shown = [int(seq) for prompt in prompts for seq in re.findall(r"^\[(\d+)\] 2023", prompt[1]["content"], re.M)]
    assert shown == [message.seq for message in messages_of(session)]
    assert all(message.learned_at is not None for message in messages_of(session))
    if budget == 2000:  # the budget, not the turn count, made the batches
        assert len(prompts) > LOCOMO_LARGEST_TURNS / settings.EXTRACTION_MAX_TURNS


@pytest.mark.django_db(transaction=True)
def test_extraction_of_a_user_waits_while_another_worker_holds_the_lock(client_a, add_messages, rules):
    session = converse(client_a, add_messages)
    held, release = threading.Event(), threading.Event()

    def hold():
        try:
            with advisory_lock(EXTRACT_LOCKS.key_of(session), wait=False):
                held.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        task = run_extraction(session)
        assert (task.status, task.attempts) == ("queued", 0), "it waits for the lock without spending an attempt"
    finally:
        release.set()
        holder.join()
    assert not Message.objects.filter(session=session, learned_at__isnull=False).exists()
