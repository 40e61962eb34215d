"""The OpenAI Agents SDK's `Session` (`agents.memory.SessionABC`) on the platform: an agent's
conversation history kept as turns of platform sessions (`pip install
'memory-platform-client[openai-agents]'`).

Each Responses API input item the SDK adds becomes one chat turn the platform learns from (a message,
an assistant tool call, a tool result; any other item type as an assistant turn naming its type), with
the item itself kept in the turn's `metadata` so `get_items` returns exactly what was added. Turns
written another way (`MemoryClient.add`) come back as the equivalent items. `pop_item` deletes the
latest turn (`DELETE memory/message/<id>`) and returns its item.

Memory in the prompt and the skill loop (`skill_loop`), beside the session:

    session = PlatformSession("chat 42", user_id="alice", client=memory, session_tag="task", outcome="success")
    agent = Agent(name="booker", instructions=session.instructions("You book flights."), tools=[...])
    result = await Runner.run(agent, "Book me a flight to Lisbon", session=session)
    await session.finish(result)   # applied skills, outcome, seal: the next run is a new task session

`session.instructions(base)` is an `instructions` callable: before each model call it adds to `base`
the user's context and the skills retrieved for the latest user message (one round trip each, at once;
the model calls of one request share them), delimited and labelled as data."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from agents.memory import SessionABC

from memory_platform_client.adapters.skill_loop import MemoryOptions, SkillLoop, tools_named
from memory_platform_client.client import AsyncMemoryClient
from memory_platform_client.messages import to_json

ITEM_KEY = "openai_agents_item"
TEXT_PARTS = ("input_text", "output_text", "text")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts, others = [], []
    for part in content or []:
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS:
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and part.get("type") == "refusal":
            texts.append(str(part.get("refusal", "")))
        else:
            others.append(f"[{part.get('type', 'part') if isinstance(part, dict) else 'part'}]")
    return "\n".join(texts + others)


def latest_user_text(items: list[Any]) -> str:
    """The text of the last user message among Responses API input items ("" when none)."""
    for item in reversed(items or []):
        item = to_json(item) if not isinstance(item, (str, dict)) else item
        if isinstance(item, str):
            return item
        if item.get("role") == "user" and item.get("type") in (None, "message"):
            return _text(item.get("content"))
    return ""


def item_to_turn(item: Any) -> dict:
    """One Responses API input item as the chat turn the platform stores, the item in its metadata."""
    item = to_json(item)
    kind = item.get("type")
    metadata = {ITEM_KEY: item}
    if kind == "function_call":
        call = {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call], "metadata": metadata}
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text(output) if isinstance(output, list) else json.dumps(output)
        return {"role": "tool", "tool_call_id": item["call_id"], "content": text, "metadata": metadata}
    if "role" in item and kind in (None, "message"):
        text = _text(item.get("content")) or f"[{item['role']} message]"
        return {"role": item["role"], "content": text, "metadata": metadata}
    described = {key: value for key, value in item.items() if key not in ("id", "type", "encrypted_content")}
    return {"role": "assistant", "content": f"[{kind}] {json.dumps(described)}", "metadata": metadata}


def turn_to_items(turn: dict) -> list[dict]:
    """The items a stored turn stands for: the one it was added as, else its equivalent."""
    item = (turn.get("metadata") or {}).get(ITEM_KEY)
    if item is not None:
        return [item]
    if turn["role"] == "tool":
        return [{"type": "function_call_output", "call_id": turn["tool_call_id"], "output": turn["content"]}]
    items = [{"role": turn["role"], "content": turn["content"]}] if turn["content"] else []
    for call in turn.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id", ""),
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
            }
        )
    return items


class PlatformSession(SessionABC):
    """`PlatformSession(session_id, user_id=..., client=AsyncMemoryClient(...))`; pass it to
    `Runner.run(agent, input, session=...)`.

    `session_id` may be any string (kept in the platform as `_transcript.session_key(session_id)`).
    The history is the platform sessions `<key>`, `<key>--2`… of `user_id` in the key's write scope
    (a chain: the platform seals a session when idle or when the user opens another, see
    `_transcript`). `session_tag="task"` makes it a task session distilled into skills, each run ended
    by `finish(result)` with `outcome` (a string, or a callable given the `RunResult`) and the served
    skills it `applied`; `options` (`MemoryOptions`) shape what `instructions` adds."""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str,
        client: AsyncMemoryClient,
        session_tag: str = "conversation",
        clear_timeout: float = 60.0,
        outcome: str | Callable[[Any], Any] | None = None,
        applied: Callable[[dict, list[str]], bool] | str | None = tools_named,
        options: MemoryOptions | None = None,
    ):
        self.session_id = session_id
        self.session_settings = None
        self.client = client
        self.clear_timeout = clear_timeout
        self.loop = SkillLoop.tagged(
            session_tag, user_id=user_id, session_id=session_id, outcome=outcome, applied=applied, options=options
        )
        self._transcript = self.loop.transcript

    async def get_items(self, limit: int | None = None) -> list[dict]:
        """The history in order; with `limit`, its latest `limit` items."""
        turns = await self.client._driver.run(self._transcript.turns(limit))
        items = [item for turn in turns for item in turn_to_items(turn)]
        return items if limit is None else items[max(0, len(items) - limit) :]

    async def add_items(self, items: list[Any]) -> None:
        await self.loop.asave(self.client, [item_to_turn(item) for item in items])

    async def pop_item(self) -> dict | None:
        turn = await self.client._driver.run(self._transcript.pop())
        if turn is None:
            return None
        return turn_to_items(turn)[-1]

    async def clear_session(self) -> None:
        """Deletes the history and what the platform learned from it, waiting for the purge."""
        await self.client._driver.run(self._transcript.clear(self.clear_timeout))
        self.loop.forget()

    def instructions(self, base: str | Callable[..., Any] = "") -> Callable[..., Any]:
        """An `Agent(instructions=...)` callable: `base` (a string, or the SDK's own instructions
        callable) followed by the memory block for the latest user message."""

        async def instructions(context, agent) -> str:
            text = base(context, agent) if callable(base) else base
            text = (await text) if inspect.isawaitable(text) else text
            block = await self.loop.aprompt(self.client, latest_user_text(context.turn_input))
            return "\n\n".join(part for part in (text, block.text) if part)

        return instructions

    async def finish(self, result: Any = None) -> dict | None:
        """Closes the skill loop of a task run (see `SkillLoop.finish`); nothing for a conversation."""
        return await self.loop.afinish(self.client, result)
