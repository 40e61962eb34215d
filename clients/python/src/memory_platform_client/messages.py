"""Chat messages as the OpenAI SDK produces them (dicts, TypedDicts or its pydantic objects) made
plain JSON for `memory/add`: tool calls, tool results and content parts pass through unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any


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
