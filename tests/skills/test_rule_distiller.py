"""The rule-based distiller on real tau-bench airline trajectories."""

import pytest

from apps.conversations.selectors import session_messages
from apps.skills.services.rule_distiller import is_error, rule_lessons, tool_calls
from tests.fixtures import tau_trajectories
from tests.skills.factories import tau_session

pytestmark = pytest.mark.django_db


def _first(predicate):
    return next(item for item in tau_trajectories() if predicate(item))


def _errors_then_success(item) -> bool:
    """A tool result that is an error, and a later successful result of the same tool."""
    results = [
        (m.get("name"), (m.get("content") or "").startswith("Error")) for m in item["traj"] if m["role"] == "tool"
    ]
    return any(
        failed and any(name == later and not later_failed for later, later_failed in results[index + 1 :])
        for index, (name, failed) in enumerate(results)
    )


def test_a_tool_error_followed_by_a_successful_retry_is_a_lesson_worth_avoiding(client_a):
    trajectory = _first(_errors_then_success)
    session = tau_session(client_a, trajectory)
    messages = list(session_messages(session=session))

    avoiding = [
        lesson
        for lesson in rule_lessons(session=session, messages=messages)
        if lesson.experience_type == "worth_avoiding"
    ]

    assert avoiding
    lesson = avoiding[0]
    tool = lesson.action_signature[0]
    error_turn = next(m for m in messages if m.pk == lesson.source_message_ids[1])
    assert error_turn.role == "tool" and error_turn.name == tool
    assert lesson.evidence["signal_type"] == "tool_error"
    assert lesson.evidence["quote"].startswith("Error") and lesson.evidence["quote"] in error_turn.content
    assert lesson.credibility >= 0.8
    assert tool in lesson.title and len(lesson.title) <= 120
    retry_turn = next(m for m in messages if m.pk == lesson.source_message_ids[2])
    assert (
        retry_turn.seq > error_turn.seq
        and retry_turn.name == tool
        and not is_error(retry_turn.content.split("] ", 1)[1])
    )


def test_a_tool_error_without_a_later_success_teaches_nothing(client_a):
    messages = [
        {"role": "user", "content": "Please cancel my reservation ABC123 today."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "cancel_reservation", "arguments": '{"reservation_id": "ABC123"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "cancel_reservation", "content": "Error: reservation not found"},
        {"role": "assistant", "content": "I could not find it."},
    ]
    from tests.skills.factories import task_session

    session = task_session(client_a, messages=messages, outcome="failure")
    assert rule_lessons(session=session, messages=list(session_messages(session=session))) == []


def test_a_successful_session_is_a_workflow_lesson_whose_signature_covers_the_gold_actions(client_a):
    trajectory = _first(lambda item: item["reward"] >= 1.0 and item["info"]["task"]["actions"])
    session = tau_session(client_a, trajectory)
    messages = list(session_messages(session=session))

    (workflow,) = [
        lesson
        for lesson in rule_lessons(session=session, messages=messages)
        if lesson.experience_type == "worth_learning"
    ]

    gold = {action["name"] for action in trajectory["info"]["task"]["actions"]}
    assert gold <= set(workflow.action_signature)
    assert workflow.action_signature == list(dict.fromkeys(workflow.action_signature))  # distinct, in order
    first_user_turn = next(m["content"] for m in trajectory["traj"] if m["role"] == "user")
    assert workflow.content.startswith(f"Request: {first_user_turn}"[:60])
    assert "Steps:\n1. " in workflow.content
    assert workflow.evidence["signal_type"] == "inferred" and workflow.credibility <= 0.5


def test_a_failed_session_yields_no_workflow_lesson(client_a):
    trajectory = _first(lambda item: item["reward"] < 1.0)
    session = tau_session(client_a, trajectory)
    lessons = rule_lessons(session=session, messages=list(session_messages(session=session)))
    assert all(lesson.experience_type == "worth_avoiding" for lesson in lessons)


def test_calls_pair_with_their_results_by_call_id(client_a):
    session = tau_session(client_a, tau_trajectories()[0])
    calls = tool_calls(list(session_messages(session=session)))
    assert calls and all(call.result_message is not None for call in calls)
    assert all(call.result_message.name == call.name for call in calls)
