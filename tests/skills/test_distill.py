"""Distillation: the handler, the LLM distiller through the fake server, routing and locking."""

import threading

import pytest
from django.db import connection

from apps.conversations.models import Message, Session
from apps.pipeline.locks import advisory_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.providers.models import LLMUsage
from apps.skills.models import SkillExperience
from apps.skills.services.distill import DISTILL_LOCKS
from tests.fixtures import tau_trajectories
from tests.skills.factories import task_session, tau_session

pytestmark = pytest.mark.django_db

TRANSCRIPT = [
    {"role": "user", "content": "Please change my flight to tomorrow."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "update_flight", "arguments": '{"date": "2024-05-14"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "update_flight", "content": "Error: flight not available on date"},
    {"role": "assistant", "content": "That date is not available. Shall I try the 15th?"},
    {"role": "user", "content": "No, you should have checked availability first. Try the 15th."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "update_flight", "arguments": '{"date": "2024-05-15"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "name": "update_flight", "content": '{"status": "ok"}'},
]


def _distill_task(session) -> MemoryTask:
    return MemoryTask.objects.get(task_type="distill_session", payload__session=str(session.pk))


def test_sealing_a_task_session_enqueues_distillation_and_a_conversation_session_does_not(
    client_a, add_messages, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks():
        task_body = add_messages(client_a, session_id="t1", session_tag="task", seal=True)
        chat_body = add_messages(client_a, session_id="c1", session_tag="conversation", seal=True)
    session = Session.objects.get(session_id="t1")
    task = _distill_task(session)
    assert task.idempotency_key == f"distill:{session.pk}"
    assert str(task.pk) in task_body["task_ids"]
    assert not MemoryTask.objects.filter(
        task_type="distill_session", payload__session=str(Session.objects.get(session_id="c1").pk)
    ).exists()
    assert chat_body["status"] == "sealed"


def test_the_handler_stores_experiences_marks_the_session_and_queues_evolution(client_a, rules):
    trajectory = next(item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"])
    session = tau_session(client_a, trajectory)
    task = _distill_task(session)

    assert task_execute(task_id=task.pk, worker="test") == "succeeded"

    task.refresh_from_db()
    session.refresh_from_db()
    experiences = list(SkillExperience.objects.all())
    assert task.result["experiences"] == len(experiences) >= 1
    assert task.result["distiller"] == "rules"
    assert session.distilled_at is not None
    assert not Message.objects.filter(session=session, learned_at__isnull=True).exists()
    for experience in experiences:
        assert (experience.organization, experience.scope, experience.session) == (
            client_a.organization,
            "default",
            session,
        )
        assert experience.end_user == session.end_user and experience.created_by == client_a
        assert experience.embedding is not None and experience.embedding_model == "hash-384"
        assert experience.status == "pending" and experience.source_message_ids
    evolve = MemoryTask.objects.get(task_type="evolve_skills")
    assert evolve.payload == {"scope": "default"} and evolve.organization == client_a.organization
    assert evolve.idempotency_key == f"evolve:{client_a.organization.pk}:default"
    assert task.result["evolve_task"] == str(evolve.pk)

    # Idempotent: a second run stores nothing more.
    again = MemoryTask(pk=task.pk, payload=task.payload, organization=task.organization)
    from apps.skills.handlers import handle_distill_session

    assert handle_distill_session(again)["skipped"] == "already distilled"
    assert SkillExperience.objects.count() == len(experiences)


def test_a_workflow_seen_again_with_the_same_request_is_deduplicated(client_a, rules):
    messages = [
        {"role": "user", "content": "Book the usual flight to Boston for me please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "book_reservation", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "book_reservation", "content": '{"ok": true}'},
    ]
    from apps.skills.services.distill import session_distill

    first = session_distill(session=task_session(client_a, messages=messages, session_id="a"))
    second = session_distill(session=task_session(client_a, messages=messages, session_id="b"))
    assert (first["experiences"], first["duplicates"]) == (1, 0)
    assert (second["experiences"], second["duplicates"]) == (0, 1)
    assert Session.objects.get(session_id="b").distilled_at is not None


def test_the_llm_distiller_stores_validated_lessons(client_a, fake_openai):
    session = task_session(client_a, messages=TRANSCRIPT, outcome="success")
    fake_openai.add_json(
        {
            "lessons": [
                {
                    "experience_type": "worth_avoiding",
                    "title": "Check availability before changing a flight " + "x" * 200,
                    "content": "Search for availability on the new date before calling update_flight.",
                    "importance": 1.7,
                    "credibility": 0.9,
                    "evidence": {
                        "quote": "you should have checked availability first",
                        "seqs": [5],
                        "signal_type": "user_critique",
                    },
                },
                {
                    "experience_type": "worth_learning",
                    "title": "Invented praise",
                    "content": "The user loved it.",
                    "importance": 0.5,
                    "credibility": 0.95,
                    "evidence": {"quote": "This was perfect, thank you!", "signal_type": "user_confirmation"},
                },
                {
                    "experience_type": "worth_remembering",
                    "title": "Bad type",
                    "content": "x",
                    "importance": 0.5,
                    "credibility": 0.5,
                },
                {
                    "experience_type": "worth_learning",
                    "title": "Bad signal",
                    "content": "x",
                    "importance": 0.5,
                    "credibility": 0.5,
                    "evidence": {"quote": "", "signal_type": "gut_feeling"},
                },
                {
                    "experience_type": "worth_learning",
                    "title": "Bad number",
                    "content": "x",
                    "importance": "very",
                    "credibility": 0.5,
                },
            ]
        }
    )
    task = _distill_task(session)
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"

    critique = SkillExperience.objects.get(experience_type="worth_avoiding")
    assert len(critique.title) == 120
    assert critique.importance == 1.0  # clamped
    assert critique.evidence == {"quote": "you should have checked availability first", "signal_type": "user_critique"}
    assert critique.source_message_ids == [Message.objects.get(session=session, seq=5).pk]
    invented = SkillExperience.objects.get(title="Invented praise")
    assert invented.evidence["signal_type"] == "inferred" and invented.credibility <= 0.5
    assert SkillExperience.objects.count() == 2
    task.refresh_from_db()
    problems = " ".join(task.result["problems"])
    assert "worth_remembering" in problems and "gut_feeling" in problems and "importance" in problems
    assert task.result["distiller"] == "llm:fake-model"

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert "[5] user: No, you should have checked availability first." in prompt
    assert "[tool_call update_flight(" in prompt and "Error: flight not available" in prompt
    assert LLMUsage.objects.get().task_id == task.pk


def test_existing_skills_are_shown_to_the_llm_distiller(client_a, fake_openai):
    from tests.skills.factories import SkillFactory

    SkillFactory(organization=client_a.organization, name="check-availability", description="Check seats first.")
    session = task_session(client_a, messages=TRANSCRIPT)
    fake_openai.add_json({"lessons": []})
    task_execute(task_id=_distill_task(session).pk, worker="test")
    assert "- check-availability: Check seats first." in fake_openai.chat_requests()[0]["messages"][1]["content"]


@pytest.mark.parametrize("answer", ["I think the agent did fine.", '{"lessons": "none"}', "[]"])
def test_garbage_from_the_llm_is_no_lessons_logged_on_the_task_never_a_crash(client_a, fake_openai, answer):
    session = task_session(client_a, messages=TRANSCRIPT)
    fake_openai.add_text(answer)
    task = _distill_task(session)
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    task.refresh_from_db()
    assert task.result["experiences"] == 0 and task.result["problems"]
    assert SkillExperience.objects.count() == 0
    session.refresh_from_db()
    assert session.distilled_at is not None
    assert not MemoryTask.objects.filter(task_type="evolve_skills").exists()


def test_an_unreachable_llm_fails_the_task_for_a_retry_and_leaves_the_session_undistilled(client_a, fake_openai):
    session = task_session(client_a, messages=TRANSCRIPT)
    for _ in range(3):
        fake_openai.add_error(503)
    task = _distill_task(session)
    assert task_execute(task_id=task.pk, worker="test") == "failed"
    session.refresh_from_db()
    assert session.distilled_at is None
    assert SkillExperience.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_distillation_of_a_user_waits_while_another_worker_holds_the_lock(client_a, rules):
    session = task_session(client_a, messages=TRANSCRIPT)
    held, release = threading.Event(), threading.Event()

    def hold():
        try:
            with advisory_lock(DISTILL_LOCKS.key_of(session), wait=False):
                held.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        task = _distill_task(session)
        assert task_execute(task_id=task.pk, worker="test") == "deferred"
        task.refresh_from_db()
        assert (task.status, task.attempts) == ("queued", 0), "it waits for the lock without spending an attempt"
    finally:
        release.set()
        holder.join()
    session.refresh_from_db()
    assert session.distilled_at is None


def test_a_distill_task_for_a_session_that_cannot_be_distilled_is_skipped_not_retried(client_a, add_messages, rules):
    from apps.pipeline.services import enqueue

    add_messages(client_a, session_id="chat", session_tag="conversation", seal=True)
    chat = Session.objects.get(session_id="chat")
    task = enqueue("distill_session", {"session": str(chat.pk)}, organization=client_a.organization)
    gone = enqueue(
        "distill_session", {"session": "7d1c8a3e-8d2a-4c55-9b5e-9a3b2f0c1d2e"}, organization=client_a.organization
    )
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    assert task_execute(task_id=gone.pk, worker="test") == "succeeded"
    task.refresh_from_db()
    gone.refresh_from_db()
    assert "only task sessions" in task.result["skipped"]
    assert gone.result["skipped"] == "session no longer exists"
    chat.refresh_from_db()
    assert chat.distilled_at is None


@pytest.mark.parametrize("budget", [8000, 2000])
def test_the_distillers_prompt_for_the_largest_locomo_sized_session_fits_the_token_budget(
    client_a, add_messages, fake_openai, settings, budget
):
    from apps.providers.tokens import prompt_tokens
    from tests.memories.test_extract import LOCOMO_LARGEST_CHARS, largest_session_turns

    settings.LLM_MAX_PROMPT_TOKENS = budget
    turns = [{key: turn[key] for key in ("role", "content")} for turn in largest_session_turns()]
    assert sum(len(turn["content"]) for turn in turns) >= LOCOMO_LARGEST_CHARS
    add_messages(client_a, session_id="task-1", messages=turns[:340], session_tag="task")
    session = task_session(client_a, messages=turns[340:])
    fake_openai.add_json({"lessons": []})

    assert task_execute(task_id=_distill_task(session).pk, worker="test") == "succeeded"

    (request,) = fake_openai.chat_requests()
    transcript = request["messages"][1]["content"]
    assert prompt_tokens(request["messages"]) <= budget
    # The request at the start and the outcome at the end are kept; the middle is elided, and said so.
    assert "[1] user: Turn 0:" in transcript and f"[{len(turns)}] assistant: Turn {len(turns) - 1}:" in transcript
    assert "elided from the middle of the transcript" in transcript
