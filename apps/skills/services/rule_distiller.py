"""The offline distiller (after Agent Workflow Memory's rule-based induction): a tool error later
fixed is a `worth_avoiding` lesson, a successful session a `worth_learning` workflow lesson."""

import json
import re
from dataclasses import dataclass

from django.conf import settings

from apps.skills.models import TITLE_MAX_LENGTH, ExperienceType, SignalType
from apps.skills.services.lessons import Lesson

ERROR_PREFIXES = ("error", "exception", "traceback", "failed", "failure")
REQUEST_MIN_CHARS = 25
# A step names a tool and its argument names, which come from the transcript: bounded like any copied text.
STEP_MAX_CHARS = 200
_DIGITS = re.compile(r"\d+")


@dataclass
class ToolCall:
    name: str
    arguments: dict
    call_message: object
    result_message: object | None = None
    result: str = ""

    @property
    def failed(self) -> bool:
        return self.result_message is not None and is_error(self.result)


def is_error(text: str) -> bool:
    stripped = text.strip()
    if stripped.lower().startswith(ERROR_PREFIXES):
        return True
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return False
        return isinstance(value, dict) and bool(value.get("error"))
    return False


def _arguments(raw) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _result_text(message) -> str:
    """A stored tool turn starts with `[tool_name] `; the result is what follows."""
    text = message.content or ""
    prefix = f"[{message.name or 'tool'}] "
    return text[len(prefix) :] if text.startswith(prefix) else text


def tool_calls(messages) -> list[ToolCall]:
    """Calls in order, each paired with its result turn (by tool_call_id, else by tool name)."""
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            for raw in message.tool_calls:
                function = raw.get("function") or {}
                if not isinstance(function.get("name"), str):
                    continue
                call = ToolCall(
                    name=function["name"], arguments=_arguments(function.get("arguments")), call_message=message
                )
                calls.append(call)
                if raw.get("id"):
                    by_id[raw["id"]] = call
        elif message.role == "tool":
            call = by_id.pop(message.tool_call_id, None) if message.tool_call_id else None
            if call is None:
                call = next((c for c in calls if c.result_message is None and c.name == message.name), None)
            if call is not None:
                call.result_message = message
                call.result = _result_text(message)
    return calls


def action_signature(calls: list[ToolCall]) -> list[str]:
    """The distinct tools that ran successfully, in the order of their first success."""
    return list(dict.fromkeys(call.name for call in calls if call.result_message is not None and not call.failed))


def task_request(messages) -> tuple[str, list]:
    """The user's request: the first user turn, joined with the next one when it is only a greeting."""
    user_turns = [message for message in messages if message.role == "user" and (message.content or "").strip()]
    taken, text = [], ""
    for message in user_turns[:2]:
        taken.append(message)
        text = f"{text} {message.content.strip()}".strip()
        if len(text) >= REQUEST_MIN_CHARS:
            break
    return text, taken


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _avoid_lessons(calls: list[ToolCall]) -> list[Lesson]:
    lessons, seen = [], set()
    for index, call in enumerate(calls):
        if not call.failed:
            continue
        retry = next(
            (
                later
                for later in calls[index + 1 :]
                if later.name == call.name and later.result_message is not None and not later.failed
            ),
            None,
        )
        if retry is None:
            continue
        error = call.result.strip()
        key = (call.name, _DIGITS.sub("#", error.lower()))
        if key in seen:
            continue
        seen.add(key)
        changed = sorted(
            name
            for name in set(call.arguments) | set(retry.arguments)
            if call.arguments.get(name) != retry.arguments.get(name)
        )
        fix = (
            f" The call succeeded after changing: {', '.join(changed)}."
            if changed
            else " The same call succeeded on a retry."
        )
        content = (
            f'Calling {call.name} failed with "{_short(error, 300)}".{fix} '
            f"Check these arguments against what earlier tool results say before calling {call.name}."
        )
        lessons.append(
            Lesson(
                experience_type=ExperienceType.WORTH_AVOIDING,
                title=_short(f"{call.name} failed: {error}", TITLE_MAX_LENGTH),
                content=content,
                importance=0.7,
                credibility=0.9,
                evidence={"quote": error[: settings.EVIDENCE_MAX_CHARS], "signal_type": SignalType.TOOL_ERROR},
                source_message_ids=[call.call_message.pk, call.result_message.pk, retry.result_message.pk],
                action_signature=[call.name],
            )
        )
    return lessons


def _workflow_lesson(messages, calls: list[ToolCall]) -> Lesson | None:
    signature = action_signature(calls)
    if not signature:
        return None
    request, request_messages = task_request(messages)
    steps, listed = [], set()
    for call in calls:
        if call.name in signature and call.name not in listed and not call.failed:
            listed.add(call.name)
            steps.append(
                f"{len(steps) + 1}. " + _short(f"{call.name}({', '.join(sorted(call.arguments))})", STEP_MAX_CHARS)
            )
    content = f"Request: {_short(request, 500) or '(none)'}\nSteps:\n" + "\n".join(steps)
    return Lesson(
        experience_type=ExperienceType.WORTH_LEARNING,
        title=_short(workflow_title(signature), TITLE_MAX_LENGTH),
        content=content,
        importance=0.6,
        # Inferred from the session's outcome, not from a quote: low credibility by the rule.
        credibility=0.5,
        evidence={"quote": request[: settings.EVIDENCE_MAX_CHARS], "signal_type": SignalType.INFERRED},
        source_message_ids=[message.pk for message in request_messages]
        + list(dict.fromkeys(call.call_message.pk for call in calls if call.name in signature)),
        action_signature=signature,
    )


def rule_lessons(*, session, messages) -> list[Lesson]:
    calls = tool_calls(messages)
    lessons = _avoid_lessons(calls)
    if session.outcome == "success":
        workflow = _workflow_lesson(messages, calls)
        if workflow is not None:
            lessons.append(workflow)
    return lessons


def workflow_steps(content: str) -> list[str]:
    return [line.strip() for line in content.splitlines() if re.match(r"^\s*\d+\. ", line)]


def workflow_title(signature) -> str:
    return "Workflow: " + " → ".join(signature)


def workflow_request(content: str) -> str:
    first = content.splitlines()[0] if content else ""
    return first[len("Request: ") :] if first.startswith("Request: ") else ""
