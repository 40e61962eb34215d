"""LangChain's `BaseChatMessageHistory` on the platform (`pip install
'memory-platform-client[langchain]'`): a chat history kept as turns of platform sessions, for
`RunnableWithMessageHistory` and anything else that takes a history.

Each message is stored as the OpenAI chat turn LangChain converts it to (so the platform learns from
it), with the message itself (`message_to_dict`) in the turn's `metadata`: `messages` returns exactly
what was added. Turns written another way come back as the messages LangChain reads from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
from langchain_core.messages.base import message_to_dict
from langchain_core.messages.utils import messages_from_dict
from langchain_core.runnables.config import run_in_executor

from memory_platform_client.adapters.skill_loop import MemoryBlock, MemoryOptions, SkillLoop, tools_named
from memory_platform_client.client import AsyncMemoryClient, MemoryClient

MESSAGE_KEY = "langchain_message"


def message_to_turn(message: BaseMessage) -> dict:
    turn = convert_to_openai_messages(message)
    if not turn.get("content") and not turn.get("tool_calls") and turn["role"] != "tool":
        turn["content"] = f"[empty {message.type} message]"
    return {**turn, "metadata": {MESSAGE_KEY: message_to_dict(message)}}


def turn_to_message(turn: dict) -> BaseMessage:
    stored = (turn.get("metadata") or {}).get(MESSAGE_KEY)
    if stored is not None:
        return messages_from_dict([stored])[0]
    plain = {key: turn[key] for key in ("role", "content", "tool_call_id", "name") if turn.get(key)}
    if turn.get("tool_calls"):
        plain["tool_calls"] = turn["tool_calls"]
    plain.setdefault("content", "")
    return convert_to_messages([plain])[0]


class PlatformChatMessageHistory(BaseChatMessageHistory):
    """`PlatformChatMessageHistory(session_id, user_id=..., client=MemoryClient(...))`, and/or
    `async_client=AsyncMemoryClient(...)` for `aget_messages`, `aadd_messages` and `aclear` (without
    it they run the blocking client in a worker thread; without `client` only they work).

    `session_id` may be any string (kept in the platform as `_transcript.session_key(session_id)`).
    The history is the platform sessions `<key>`, `<key>--2`… of `user_id` in the key's write scope
    (a chain: the platform seals a session when idle or when the user opens another).

    The skill loop (`skill_loop`): `memory(query)` is the block of context and skills to put in the
    prompt; with `session_tag="task"` the history is a task session, and `finish(run)` ends it — the
    skills served by `memory` that the messages applied, the `outcome` (a string, or a callable given
    `run`), the seal — and the next message opens the next session of the chain. `options` and
    `applied` as for `SkillLoop`. (LangChain deprecates the chat history for LangGraph persistence:
    for a LangChain 1.x agent, `adapters.langchain.MemoryMiddleware` does all of this by itself.)"""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str,
        client: MemoryClient | None = None,
        async_client: AsyncMemoryClient | None = None,
        session_tag: str = "conversation",
        clear_timeout: float = 60.0,
        outcome: str | Callable[[Any], Any] | None = None,
        applied: Callable[[dict, list[str]], bool] | str | None = tools_named,
        options: MemoryOptions | None = None,
    ):
        if client is None and async_client is None:
            raise ValueError("pass client= (a MemoryClient), async_client= (an AsyncMemoryClient) or both")
        self.session_id = session_id
        self.client = client
        self.async_client = async_client
        self.clear_timeout = clear_timeout
        self.loop = SkillLoop.tagged(
            session_tag, user_id=user_id, session_id=session_id, outcome=outcome, applied=applied, options=options
        )
        self._transcript = self.loop.transcript

    def _sync(self) -> MemoryClient:
        if self.client is None:
            raise RuntimeError(
                "this history has no blocking client: pass client=MemoryClient(...), or use the a-methods"
            )
        return self.client

    @property
    def messages(self) -> list[BaseMessage]:
        return [turn_to_message(turn) for turn in self._sync()._driver.run(self._transcript.turns())]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.loop.save(self._sync(), [message_to_turn(message) for message in messages])

    def clear(self) -> None:
        """Deletes the history and what the platform learned from it, waiting for the purge."""
        self._sync()._driver.run(self._transcript.clear(self.clear_timeout))
        self.loop.forget()

    def memory(self, query: str) -> MemoryBlock:
        """The block for a request: `block.text` goes into the prompt (see `SkillLoop.prompt`)."""
        return self.loop.prompt(self._sync(), query)

    def finish(self, run: Any = None) -> dict | None:
        """Ends a task history's current session (see the class) → the seal's answer, or None."""
        return self._sync()._driver.run(self.loop._finish(run, last=True))

    # The a-methods: on the async client, else the blocking one in a worker thread (LangChain's default).

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await super().aget_messages()
        turns = await self.async_client._driver.run(self._transcript.turns())
        return [turn_to_message(turn) for turn in turns]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            return await super().aadd_messages(messages)
        await self.loop.asave(self.async_client, [message_to_turn(message) for message in messages])

    async def aclear(self) -> None:
        if self.async_client is None:
            return await super().aclear()
        await self.async_client._driver.run(self._transcript.clear(self.clear_timeout))
        self.loop.forget()

    async def amemory(self, query: str) -> MemoryBlock:
        if self.async_client is None:
            return await run_in_executor(None, self.memory, query)
        return await self.loop.aprompt(self.async_client, query)

    async def afinish(self, run: Any = None) -> dict | None:
        if self.async_client is None:
            return await run_in_executor(None, self.finish, run)
        return await self.async_client._driver.run(self.loop._finish(run, last=True))
