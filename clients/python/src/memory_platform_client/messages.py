"""The chat message, defined once: `ChatMessage` is what `memory/add` and `memory/context` take. The
platform validates turns with it (naming the message and field), documents it in its OpenAPI schema
from it, and the MCP tools take it as their argument type. Messages as the OpenAI SDK produces them
(dicts, TypedDicts or its pydantic objects) are made plain JSON by `to_messages`: tool calls, tool
results and content parts pass through unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
ROLES = frozenset(get_args(Role))
TOOL_RESULT_ROLES = ("tool", "function")
# Fields of OpenAI's message objects that carry nothing to remember: accepted and dropped.
IGNORED_FIELDS = frozenset({"refusal", "annotations", "audio", "reasoning", "reasoning_content"})


def _content_rule_schema(schema: dict) -> None:
    """`ChatMessage.content_problem`, for JSON Schema readers."""
    tool_roles = list(TOOL_RESULT_ROLES)
    other_roles = sorted(ROLES - set(TOOL_RESULT_ROLES))
    text, parts = {"type": "string"}, {"type": "array"}
    schema["anyOf"] = [
        {"properties": {"role": {"enum": tool_roles}, "content": {"anyOf": [text, parts]}}, "required": ["content"]},
        {
            "properties": {
                "role": {"enum": other_roles},
                "content": {"anyOf": [{**text, "minLength": 1}, {**parts, "minItems": 1}]},
            },
            "required": ["content"],
        },
        {
            "properties": {"role": {"enum": other_roles}, "tool_calls": {"type": "array", "minItems": 1}},
            "required": ["tool_calls"],
        },
        {
            "properties": {"role": {"enum": other_roles}, "function_call": {"type": "object"}},
            "required": ["function_call"],
        },
    ]


class ChatMessage(BaseModel):
    """An OpenAI chat message. Tool and function results need content; other roles need non-empty
    content, tool_calls or function_call."""

    # Strict: a number is not a string here. NaN and ±Infinity pass through as numbers, for the
    # platform to refuse (pydantic's JSON mode would otherwise write them as null).
    model_config = ConfigDict(
        extra="forbid", strict=True, ser_json_inf_nan="constants", json_schema_extra=_content_rule_schema
    )

    role: Role = Field(description="'function' is stored as 'tool' and 'developer' as 'system'.")
    content: str | list[Any] | None = Field(
        default=None, description="The text, or OpenAI content parts; may be empty on a pure tool-call turn."
    )
    name: str | None = Field(default=None, description="The speaker's name, or the tool's name on a tool result.")
    tool_calls: list[Any] | None = Field(
        default=None,
        description='Assistant tool calls: [{"id", "type": "function", "function": {"name", "arguments"}}].',
    )
    tool_call_id: str | None = Field(default=None, description="On a tool result: the id of the call it answers.")
    function_call: dict[str, Any] | None = Field(
        default=None, description="The legacy single tool call: {name, arguments}."
    )
    metadata: dict[str, Any] | None = Field(default=None, description="Kept with the turn, as given.")
    occurred_at: str | None = Field(
        default=None,
        description="When the turn happened (ISO 8601); default now.",
        json_schema_extra={"format": "date-time"},
    )
    refusal: Any = None
    annotations: Any = None
    audio: Any = None
    reasoning: Any = None
    reasoning_content: Any = None

    def content_problem(self) -> str | None:
        """Why the platform refuses to store this message as it stands (the schema's `anyOf`), or
        None. Checked where turns are stored, so an MCP host hears it as the REST API says it."""
        if self.role in TOOL_RESULT_ROLES:
            return "A tool result needs content." if self.content is None else None
        if not self.content and not self.tool_calls and self.function_call is None:
            return "A message needs content or tool_calls."
        return None


def to_json(value: Any) -> Any:
    """Plain JSON data from dicts, lists, pydantic models (v1 or v2) and datetimes, recursively."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):  # pydantic v2, which the openai SDK's objects are
        return to_json(model_dump(mode="json", exclude_none=True))
    as_dict = getattr(value, "dict", None)
    if callable(as_dict):  # pydantic v1
        return to_json(as_dict(exclude_none=True))
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        return [to_json(item) for item in value]
    raise TypeError(f"Cannot send a {type(value).__name__} as JSON")


def to_messages(messages: Iterable[Any]) -> list[dict]:
    """The messages of one `add` call, each a JSON object with at least `role`."""
    if isinstance(messages, (str, bytes, Mapping)):
        raise TypeError("messages must be a list of chat messages, not a single value")
    converted = []
    for index, message in enumerate(messages):
        data = to_json(message)
        if not isinstance(data, dict):
            raise TypeError(f"messages[{index}] is a {type(message).__name__}, not a chat message")
        # Unset optional fields (`name: None`, `tool_calls: None`) say nothing; `content: None` is kept.
        converted.append({key: item for key, item in data.items() if item is not None or key == "content"})
    return converted
