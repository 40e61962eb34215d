"""OpenAI chat-format messages into stored turns: tool calls written into the text and kept as JSON,
content parts flattened, an oversized turn cut with a visible marker instead of failing the batch."""

import json
from dataclasses import dataclass, field
from datetime import datetime

import pydantic
from memory_platform_client.messages import ChatMessage

from apps.core.errors import InvalidInput
from apps.core.validation import InputError, check_json, parse_datetime_strict

ROLE_ALIASES = {"function": "tool", "developer": "system"}
# What a value of the wrong type is told, by field (the shape itself is ChatMessage's).
TYPE_PROBLEMS = {
    "content": "Must be a string, a list of content parts, or null.",
    "name": "Must be a string.",
    "tool_call_id": "Must be a string.",
    "tool_calls": "Must be a list of tool calls, or null.",
    "function_call": "Must be an object, or null.",
    "metadata": "Must be a JSON object.",
    "occurred_at": "Must be an ISO 8601 date-time string.",
}


class TurnError(InvalidInput):
    """Errors by message index and field, e.g. {3: {"role": ["..."]}}: a 400 naming `messages.3.role`."""

    def __init__(self, errors: dict):
        super().__init__({"messages": errors})
        self.errors = errors


@dataclass
class Turn:
    role: str
    content: str
    name: str = ""
    tool_calls: list | None = None
    tool_call_id: str = ""
    metadata: dict = field(default_factory=dict)
    occurred_at: datetime | None = None
    truncated: bool = False


def cut(text: str, limit: int) -> tuple[str, bool]:
    """Keeps the head of an oversized text and says how much was removed."""
    if len(text) <= limit:
        return text, False
    kept = max(0, limit - 40)  # leaves room for the marker within the limit
    return text[:kept] + f"\n…[truncated {len(text) - kept} characters]", True


def _part_text(part) -> str:
    """One content part as text (ChatMessage took content as a string, a list of parts or null)."""
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return part["text"]
    if isinstance(part, dict) and part.get("type") in ("image_url", "input_image", "image"):
        return "[image]"
    return json.dumps(part, ensure_ascii=False, default=str)


def _tool_call_text(call) -> tuple[dict | None, str]:
    """Returns (structured call or None when malformed, its text form)."""
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        structured = {
            "id": str(call.get("id", "")),
            "type": "function",
            "function": {"name": function["name"], "arguments": arguments},
        }
        return structured, f"[tool_call {function['name']}({arguments})]"
    # Malformed: keep what was sent, as text.
    return None, f"[tool_call {json.dumps(call, ensure_ascii=False, default=str)}]"


def _problems(exc: pydantic.ValidationError, raw: dict) -> dict[str, list[str]]:
    """ChatMessage's errors as the API names them: one message per field."""
    problems: dict[str, list[str]] = {}
    for error in exc.errors():
        field = str(error["loc"][0])
        if error["type"] == "extra_forbidden":
            problem = "Unknown field."
        elif field == "role":
            role = raw.get("role")
            shown = repr(role[:40]) if isinstance(role, str) else f"of type {type(role).__name__}"
            problem = f"Unknown role {shown}; use system, user, assistant or tool."
        else:
            problem = TYPE_PROBLEMS.get(field, error["msg"])
        problems.setdefault(field, [problem])
    return problems


def normalise_messages(raw_messages: list, *, max_chars: int, default_occurred_at: datetime) -> list[Turn]:
    """The turns of `raw_messages`; TurnError naming every bad message (by index and field) if any is."""
    errors: dict[int, dict[str, list[str]]] = {}
    turns: list[Turn] = []
    tool_names_by_call_id: dict[str, str] = {}
    for index, raw in enumerate(raw_messages):
        try:
            message, occurred_at = _checked_message(raw, default_occurred_at=default_occurred_at)
        except _BadMessage as exc:
            errors[index] = exc.args[0]
            continue
        turns.append(
            _turn(message, occurred_at=occurred_at, max_chars=max_chars, tool_names_by_call_id=tool_names_by_call_id)
        )
    if errors:
        raise TurnError(errors)
    return turns


class _BadMessage(Exception):
    """Its argument: the message's problems by field."""


def _checked_message(raw, *, default_occurred_at: datetime) -> tuple[ChatMessage, datetime]:
    """One raw message validated, with its date; _BadMessage with its problems by field."""
    if not isinstance(raw, dict):
        raise _BadMessage({"non_field_errors": ["Each message must be a JSON object."]})
    try:  # the API's parser checked this already; commands and other callers come through here too
        check_json(raw, depth=2)
    except InputError as exc:
        raise _BadMessage({exc.field or "non_field_errors": [exc.message]}) from None
    try:
        message = ChatMessage.model_validate(raw)
    except pydantic.ValidationError as exc:
        raise _BadMessage(_problems(exc, raw)) from None
    if message.content_problem():
        raise _BadMessage({"content": [message.content_problem()]})
    if message.occurred_at is None:
        return message, default_occurred_at
    try:
        occurred_at = parse_datetime_strict(
            message.occurred_at, field="occurred_at", default_tz=default_occurred_at.tzinfo
        )
    except InputError as exc:
        raise _BadMessage({"occurred_at": [exc.message]}) from None
    return message, occurred_at


def _turn(message: ChatMessage, *, occurred_at: datetime, max_chars: int, tool_names_by_call_id: dict) -> Turn:
    """A valid message as a stored turn; its calls' tool names join `tool_names_by_call_id` for the
    batch's later tool results."""
    raw_calls = message.tool_calls
    if message.function_call is not None:  # the legacy single-call shape
        raw_calls = [{"type": "function", "function": message.function_call}]
    role = ROLE_ALIASES.get(message.role, message.role)
    name = message.name or ""
    tool_call_id = message.tool_call_id or ""
    content = message.content
    text = content if isinstance(content, str) else "\n".join(map(_part_text, content or []))
    calls = [_tool_call_text(call) for call in raw_calls or []]
    structured_calls = [structured for structured, _ in calls if structured is not None] or None
    tool_names_by_call_id.update(
        (call["id"], call["function"]["name"]) for call in structured_calls or () if call["id"]
    )
    text = "\n".join(filter(None, [text, *(call_text for _, call_text in calls)]))
    if role == "tool":
        name = name or tool_names_by_call_id.get(tool_call_id, "")
        text = f"[{name or 'tool'}] {text}"
    text, truncated = cut(text, max_chars)
    return Turn(
        role=role,
        content=text,
        name=name[:255],
        tool_calls=structured_calls,
        tool_call_id=tool_call_id[:255],
        metadata=message.metadata or {},
        occurred_at=occurred_at,
        truncated=truncated,
    )
