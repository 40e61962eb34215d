"""Turn OpenAI chat-format messages into stored turns (MIRIX #139 semantics).

Tool results keep the tool's name, assistant tool calls are written into the turn's text
and kept as JSON, content parts flatten to text, and an oversized turn is cut with a
visible marker instead of failing the batch.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime

from apps.core.errors import InvalidInput
from apps.core.validation import InputError, check_json, parse_datetime_strict

ROLES = {"system", "user", "assistant", "tool", "function", "developer"}
ROLE_ALIASES = {"function": "tool", "developer": "system"}
MESSAGE_FIELDS = {"role", "content", "name", "tool_calls", "tool_call_id", "metadata", "occurred_at", "function_call"}
# Fields of OpenAI's message objects that carry nothing to remember; accepted and dropped.
IGNORED_FIELDS = {"refusal", "annotations", "audio", "reasoning", "reasoning_content"}


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


def truncation_marker(removed: int) -> str:
    return f"\n…[truncated {removed} characters]"


def cut(text: str, limit: int) -> tuple[str, bool]:
    """Keeps the head of an oversized text and says how much was removed."""
    if len(text) <= limit:
        return text, False
    kept = max(0, limit - 40)  # leaves room for the marker within the limit
    return text[:kept] + truncation_marker(len(text) - kept), True


def _flatten_content(content) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") in ("image_url", "input_image", "image"):
                texts.append("[image]")
            else:
                texts.append(json.dumps(part, ensure_ascii=False, default=str))
        return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False, default=str)


def _tool_call_text(call) -> tuple[dict | None, str]:
    """Returns (structured call or None when malformed, its text form)."""
    if (
        isinstance(call, dict)
        and isinstance(call.get("function"), dict)
        and isinstance(call["function"].get("name"), str)
    ):
        function = call["function"]
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


def normalise_messages(raw_messages: list, *, max_chars: int, default_occurred_at: datetime) -> list[Turn]:
    errors: dict[int, dict[str, list[str]]] = {}
    turns: list[Turn] = []
    tool_names_by_call_id: dict[str, str] = {}

    for index, raw in enumerate(raw_messages):
        problems: dict[str, list[str]] = {}
        if not isinstance(raw, dict):
            errors[index] = {"non_field_errors": ["Each message must be a JSON object."]}
            continue
        try:  # the API's parser checked this already; commands and other callers come through here too
            check_json(raw, depth=2)
        except InputError as exc:
            errors[index] = {exc.field or "non_field_errors": [exc.message]}
            continue
        unknown = sorted(set(raw) - MESSAGE_FIELDS - IGNORED_FIELDS)
        for name in unknown:
            problems[name] = ["Unknown field."]
        role = raw.get("role")
        if not isinstance(role, str) or role not in ROLES:
            shown = repr(role[:40]) if isinstance(role, str) else f"of type {type(role).__name__}"
            problems["role"] = [f"Unknown role {shown}; use system, user, assistant or tool."]
        metadata = raw.get("metadata", {})
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            problems["metadata"] = ["Must be a JSON object."]
        occurred_at = default_occurred_at
        if raw.get("occurred_at") is not None:
            try:
                occurred_at = parse_datetime_strict(
                    raw["occurred_at"], field="occurred_at", default_tz=default_occurred_at.tzinfo
                )
            except InputError as exc:
                problems["occurred_at"] = [exc.message]
        for text_field in ("name", "tool_call_id"):
            if raw.get(text_field) is not None and not isinstance(raw[text_field], str):
                problems[text_field] = ["Must be a string."]

        raw_content = raw.get("content")
        if raw_content is not None and not isinstance(raw_content, (str, list)):
            problems["content"] = ["Must be a string, a list of content parts, or null."]
        raw_calls = raw.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            problems["tool_calls"] = ["Must be a list of tool calls, or null."]
        function_call = raw.get("function_call")
        if function_call is not None and not isinstance(function_call, dict):
            problems["function_call"] = ["Must be an object, or null."]
        elif function_call is not None:  # the legacy single-call shape
            raw_calls = [{"type": "function", "function": function_call}]
        if role in ("tool", "function"):
            if raw_content is None:
                problems["content"] = ["A tool result needs content."]
        elif not raw_content and not raw_calls:
            problems["content"] = ["A message needs content or tool_calls."]
        if problems:
            errors[index] = problems
            continue

        content = _flatten_content(raw_content)

        role = ROLE_ALIASES.get(role, role)
        name = raw.get("name") or ""
        tool_call_id = raw.get("tool_call_id") or ""
        text = content or ""
        structured_calls = None
        if raw_calls:
            structured_calls, call_texts = [], []
            for call in raw_calls:
                structured, call_text = _tool_call_text(call)
                call_texts.append(call_text)
                if structured is not None:
                    structured_calls.append(structured)
                    if structured["id"]:
                        tool_names_by_call_id[structured["id"]] = structured["function"]["name"]
            text = "\n".join(([text] if text else []) + call_texts)
            structured_calls = structured_calls or None
        if role == "tool":
            name = name or tool_names_by_call_id.get(tool_call_id, "")
            text = f"[{name or 'tool'}] {text}"
        text, truncated = cut(text, max_chars)
        turns.append(
            Turn(
                role=role,
                content=text,
                name=name[:255],
                tool_calls=structured_calls,
                tool_call_id=tool_call_id[:255],
                metadata=metadata,
                occurred_at=occurred_at,
                truncated=truncated,
            )
        )
    if errors:
        raise TurnError(errors)
    return turns
