"""LangChain's `BaseChatMessageHistory` on the platform (`pip install
'memory-platform-client[langchain]'`): a chat history kept as turns of platform sessions, for
`RunnableWithMessageHistory` and anything else that takes a history.

Each message is stored as the OpenAI chat turn LangChain converts it to (so the platform learns from
it), with the message itself (`message_to_dict`) in the turn's `metadata`: `messages` returns exactly
what was added. Turns written another way come back as the messages LangChain reads from them."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
from langchain_core.messages.base import message_to_dict
from langchain_core.messages.utils import messages_from_dict
from langchain_core.runnables.config import run_in_executor

from memory_platform_client.adapters._transcript import Transcript
from memory_platform_client.adapters.skill_loop import close_task
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

    `session_tag="task"` makes each history a task session distilled into skills; `finish(outcome)`
    (or `afinish`) closes the skill loop: it sets the outcome and seals the session, and the next
    message opens the next session of the chain."""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str,
        client: MemoryClient | None = None,
        async_client: AsyncMemoryClient | None = None,
        session_tag: str = "conversation",
        clear_timeout: float = 60.0,
    ):
        if client is None and async_client is None:
            raise ValueError("pass client= (a MemoryClient), async_client= (an AsyncMemoryClient) or both")
        self.session_id = session_id
        self.client = client
        self.async_client = async_client
        self.clear_timeout = clear_timeout
        self._transcript = Transcript(user_id=user_id, session_id=session_id, session_tag=session_tag)

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
        self._sync()._driver.run(self._transcript.add([message_to_turn(message) for message in messages]))

    def clear(self) -> None:
        """Deletes the history and what the platform learned from it, waiting for the purge."""
        self._sync()._driver.run(self._transcript.clear(self.clear_timeout))

    def finish(self, outcome: str | None = "success", *, applied: Sequence[str] = ()) -> dict | None:
        """Closes the skill loop for a task history: marks the skills `applied` (ids of skills
        retrieved for this session), sets the `outcome` (success, failure, unknown) and seals the session;
        the next message opens the next one. → the seal's answer (None: nothing stored yet)."""
        return self._sync()._driver.run(close_task(self._transcript, outcome=outcome, applied=list(applied)))

    async def afinish(self, outcome: str | None = "success", *, applied: Sequence[str] = ()) -> dict | None:
        if self.async_client is None:
            return await run_in_executor(None, self.finish, outcome, applied=applied)
        return await self.async_client._driver.run(close_task(self._transcript, outcome=outcome, applied=list(applied)))

    # The a-methods: on the async client, else the blocking one in a worker thread (LangChain's default).

    async def aget_messages(self) -> list[BaseMessage]:
        if self.async_client is None:
            return await super().aget_messages()
        turns = await self.async_client._driver.run(self._transcript.turns())
        return [turn_to_message(turn) for turn in turns]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if self.async_client is None:
            return await super().aadd_messages(messages)
        await self.async_client._driver.run(self._transcript.add([message_to_turn(message) for message in messages]))

    async def aclear(self) -> None:
        if self.async_client is None:
            return await super().aclear()
        await self.async_client._driver.run(self._transcript.clear(self.clear_timeout))
