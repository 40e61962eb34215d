"""Memory in a LangChain 1.x agent (`pip install 'memory-platform-client[langchain]'`): an
`AgentMiddleware` for `create_agent(..., middleware=[MemoryMiddleware(...)])`, LangChain's own
extension point (agents built on LangGraph's `create_agent` use it too).

    memory = MemoryMiddleware(MemoryClient(url, api_key=key), user_id="alice", session_id="chat 42")
    agent = create_agent(model, tools=[...], system_prompt="You book flights.", middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "Book me a flight to Lisbon"}]})

- Before each model call (`wrap_model_call`) it adds to the system message the user's context
  (`memory/context` within the token budget: profile, facts, events, relevant turns) and the skills
  retrieved for the latest user message, one round trip each (at once when async); the model calls
  of one request share them. The block is delimited and labelled as data, not instructions.
- After each model call, and when the run ends (`after_model`, `after_agent`), it saves the messages
  not saved yet — the user's, the assistant's text and tool calls, the tool results — in the
  session, each once (by message id, remembered by the middleware and in the agent's state, so a
  checkpointed thread resumed by another process saves nothing twice; system messages are not saved),
  as `PlatformChatMessageHistory` stores them.
- `task=True` makes the session a task session: at the end of each run (`after_agent`) the skill
  loop is closed — the served skills the run applied are marked (`applied`), the `outcome` is set (a
  string, or a callable given the agent's final state) and the session sealed, so the platform
  learns skills from it; the next run is the next session of the chain (`<key>--2`, …).
- `options` (`skill_loop.MemoryOptions`): `max_tokens`, `memory_types`, `skills_k`, and the off
  switches `context=False`, `skills=False`, `save=False`.

`client`: a `MemoryClient` (sync hooks; async hooks run it in a worker thread) or an
`AsyncMemoryClient` (async hooks only), or both with `async_client=`. `session_id` may be any string
(see `_transcript.session_key`). One middleware is one conversation (or task agent) of one user,
its runs one after another. Errors of the platform are raised, as LangChain raises a model's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NotRequired

import anyio
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from memory_platform_client.adapters.langchain_history import message_to_turn
from memory_platform_client.adapters.skill_loop import MemoryBlock, MemoryOptions, SkillLoop, tools_named
from memory_platform_client.client import AsyncMemoryClient, MemoryClient

SAVED_IDS_KEPT = 10_000


class MemoryState(AgentState):
    """The agent's state with the ids of the messages saved (kept by a checkpointer with the thread)."""

    memory_platform_saved: NotRequired[Annotated[list[str], PrivateStateAttr]]


def latest_human_text(messages: list[BaseMessage]) -> str:
    """The text of the last human message ("" when none)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


def with_block(request: ModelRequest, text: str) -> ModelRequest:
    """The request with `text` added to its system message (or as one, when it has none)."""
    if not text:
        return request
    system = request.system_message
    if system is None:
        return request.override(system_message=SystemMessage(text))
    if isinstance(system.content, str):
        content: Any = f"{system.content}\n\n{text}" if system.content else text
    else:
        content = [*system.content, {"type": "text", "text": text}]
    return request.override(system_message=SystemMessage(content))


class MemoryMiddleware(AgentMiddleware):
    """`MemoryMiddleware(client, user_id=..., session_id=...)`: see the module's docstring."""

    state_schema = MemoryState

    def __init__(
        self,
        client: MemoryClient | AsyncMemoryClient,
        *,
        user_id: str,
        session_id: str,
        async_client: AsyncMemoryClient | None = None,
        task: bool = False,
        outcome: str | Callable[[Any], Any] | None = None,
        applied: Callable[[dict, list[str]], bool] | str | None = tools_named,
        options: MemoryOptions | None = None,
    ):
        super().__init__()
        self.client = client if isinstance(client, MemoryClient) else None
        self.async_client = async_client or (client if isinstance(client, AsyncMemoryClient) else None)
        if self.client is None and self.async_client is None:
            raise ValueError("client must be a MemoryClient or an AsyncMemoryClient")
        self.user_id = user_id
        self.session_id = session_id
        self.loop = SkillLoop(
            user_id=user_id, session_id=session_id, task=task, outcome=outcome, applied=applied, options=options
        )
        self._saved: dict[str, None] = {}  # ids of the messages saved, oldest first

    def _sync(self) -> MemoryClient:
        if self.client is None:
            raise RuntimeError("this middleware has an AsyncMemoryClient only: invoke the agent with ainvoke/astream")
        return self.client

    # What each hook does, once.

    def _unsaved(self, state: dict) -> list[BaseMessage]:
        if not self.loop.options.save:
            return []
        known = set(state.get("memory_platform_saved") or ())
        return [
            m
            for m in state["messages"]
            if not isinstance(m, SystemMessage) and m.id not in self._saved and m.id not in known
        ]

    def _saved_update(self, state: dict, new: list[BaseMessage]) -> dict:
        for message in new:
            self._saved[message.id] = None
        while len(self._saved) > SAVED_IDS_KEPT:
            del self._saved[next(iter(self._saved))]
        return {"memory_platform_saved": [*(state.get("memory_platform_saved") or ()), *(m.id for m in new)]}

    def _save(self, state: dict) -> dict | None:
        new = self._unsaved(state)
        if not new:
            return None
        self.loop.save(self._sync(), [message_to_turn(message) for message in new])
        return self._saved_update(state, new)

    async def _asave(self, state: dict) -> dict | None:
        new = self._unsaved(state)
        if not new:
            return None
        turns = [message_to_turn(message) for message in new]
        if self.async_client is not None:
            await self.loop.asave(self.async_client, turns)
        else:
            await anyio.to_thread.run_sync(self.loop.save, self._sync(), turns)
        return self._saved_update(state, new)

    async def _aprompt(self, query: str) -> MemoryBlock:
        if self.async_client is not None:
            return await self.loop.aprompt(self.async_client, query)
        return await anyio.to_thread.run_sync(self.loop.prompt, self._sync(), query)

    # LangChain's hooks.

    def wrap_model_call(self, request: ModelRequest, handler):
        block = self.loop.prompt(self._sync(), latest_human_text(request.messages))
        return handler(with_block(request, block.text))

    async def awrap_model_call(self, request: ModelRequest, handler):
        block = await self._aprompt(latest_human_text(request.messages))
        return await handler(with_block(request, block.text))

    def after_model(self, state, runtime) -> dict | None:
        return self._save(state)

    async def aafter_model(self, state, runtime) -> dict | None:
        return await self._asave(state)

    def after_agent(self, state, runtime) -> dict | None:
        update = self._save(state)
        self.loop.finish(self._sync(), state)
        return update

    async def aafter_agent(self, state, runtime) -> dict | None:
        update = await self._asave(state)
        if self.async_client is not None:
            await self.loop.afinish(self.async_client, state)
        else:
            await anyio.to_thread.run_sync(self.loop.finish, self._sync(), state)
        return update
