"""Google ADK's `BaseMemoryService` on the platform (`pip install 'memory-platform-client[google-adk]'`):
`Runner(..., memory_service=PlatformMemoryService(async_client=...))`, so ADK's memory tools
(`load_memory`, `PreloadMemoryTool`) search everything the platform knows of the user, and sessions
added to memory become platform sessions it learns from.

- `add_session_to_memory(session)` / `add_events_to_memory(...)`: the events' text, function calls
  and function responses become turns of the platform session `session_key(session.id)` of the user,
  each event once however often a session is added (its id is kept in the turn's metadata).
- `search_memory(app_name, user_id, query)`: the platform's search over every memory type of the user
  (facts, events, turns, skills, profiles; a task agent's leaves out turns, since its past runs come
  back as skills), one `MemoryEntry` per hit, its id `<memory_type>:<id>`.
- `add_memory(...)`: each entry's text as a fact (a semantic memory) stated for the user.
- `delete_memory(memory_id=...)`: the hit's memory, by the id `search_memory` gave it.

The app boundary is the API key (its organisation and scopes): `app_name` is kept in each turn's
metadata, not used to scope. With `task=True` the sessions are task sessions and
`add_session_to_memory` closes the skill loop: it seals the run with its `outcome` (a string, or a
callable given the ADK session), so the platform distils a skill from it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from memory_platform_client._http import Call
from memory_platform_client._http import Op as Operation
from memory_platform_client.adapters._transcript import Transcript, session_key
from memory_platform_client.adapters.skill_loop import close_task, resolve_outcome
from memory_platform_client.client import AsyncMemoryClient
from memory_platform_client.errors import NotFoundError

EVENT_KEY = "adk_event_id"
SEARCH_LIMIT = 10
FACT_NAME = "stated in an ADK agent"
DELETABLE = ("message", "episodic", "semantic", "procedural")
TEXT_FIELDS = ("text", "content", "summary", "instructions", "lesson", "description")
# A task run's earlier transcripts are what its skills were learned from: its searches leave them out
# (as skill_loop's context does), so the skills are not crowded out by the runs they came from.
TASK_SEARCH_TYPES = ["episodic", "semantic", "procedural", "profile", "topic"]


def event_turns(event: Event, app_name: str) -> list[dict]:
    """One ADK event as platform turns: its text (the user's or the agent's), its function calls (an
    assistant turn with tool calls) and its function responses (tool turns)."""
    parts = (event.content.parts or []) if event.content else []
    metadata = {EVENT_KEY: event.id, "adk_app": app_name, "adk_author": event.author}
    role = "user" if event.author == "user" else "assistant"
    text = "\n".join(part.text for part in parts if part.text and not part.thought)
    calls = [
        {
            "id": part.function_call.id or f"{event.id}-{n}",
            "type": "function",
            "function": {"name": part.function_call.name, "arguments": json.dumps(part.function_call.args or {})},
        }
        for n, part in enumerate(parts)
        if part.function_call
    ]
    turns = []
    if text or calls:
        turns.append({"role": role, "content": text, **({"tool_calls": calls} if calls else {}), "metadata": metadata})
    for n, part in enumerate(parts):
        if part.function_response:
            response = part.function_response
            turns.append(
                {
                    "role": "tool",
                    "name": response.name,
                    "tool_call_id": response.id or f"{event.id}-{n}",
                    "content": json.dumps(response.response, default=str),
                    "metadata": metadata,
                }
            )
    return turns


def hit_text(hit: dict) -> str:
    """What a search hit of any memory type says, as text: its name (a fact's subject, a skill's
    name), then its body."""
    body = next((hit[field] for field in TEXT_FIELDS if isinstance(hit.get(field), str) and hit[field].strip()), "")
    name = hit.get("name") if hit.get("memory_type") != "message" else None
    return f"{name}: {body}" if name and body and name not in body else body


class PlatformMemoryService(BaseMemoryService):
    """`PlatformMemoryService(async_client=AsyncMemoryClient(...))`. `task=True`: each session added is a
    task run, sealed by `add_session_to_memory` with `outcome` ("success", "failure", "unknown", or a
    callable given the ADK `Session`: True/False/None). `search_limit`: hits per search."""

    def __init__(
        self,
        *,
        async_client: AsyncMemoryClient,
        task: bool = False,
        outcome: str | Callable[[Session], Any] | None = None,
        search_limit: int = SEARCH_LIMIT,
    ):
        resolve_outcome(outcome if isinstance(outcome, str) else None, None)
        self.client = async_client
        self.task = task
        self.outcome = outcome
        self.search_limit = search_limit

    def _transcript(self, user_id: str, session_id: str) -> Transcript:
        tag = "task" if self.task else "conversation"
        return Transcript(user_id=user_id, session_id=session_key(session_id), session_tag=tag)

    def _add_events(self, transcript: Transcript, events: Sequence[Event], app_name: str) -> Operation:
        """The events no turn of the session holds yet, added (each event once)."""
        stored = yield from transcript.turns()
        seen = {(turn.get("metadata") or {}).get(EVENT_KEY) for turn in stored}
        turns = [turn for event in events if event.id not in seen for turn in event_turns(event, app_name)]
        if turns:
            yield from transcript.add(turns)
        return len(turns)

    def _add_session(self, session: Session) -> Operation:
        transcript = self._transcript(session.user_id, session.id)
        yield from self._add_events(transcript, session.events, session.app_name)
        if self.task:
            yield from close_task(transcript, outcome=resolve_outcome(self.outcome, session))
        return None

    def _search(self, user_id: str, query: str) -> Operation:
        body = {"user_id": user_id, "query": query, "limit": self.search_limit}
        if self.task:
            body["memory_types"] = TASK_SEARCH_TYPES
        hits = (yield Call("POST", "memory/search", json=body))["results"]
        return SearchMemoryResponse(
            memories=[
                MemoryEntry(
                    id=f"{hit['memory_type']}:{hit['id']}",
                    content=types.Content(role="user", parts=[types.Part(text=hit_text(hit))]),
                    author=hit.get("role") or hit["memory_type"],
                    timestamp=hit.get("occurred_at") or hit.get("updated_at") or hit.get("created_at"),
                    custom_metadata={"memory_type": hit["memory_type"], "score": hit.get("score")},
                )
                for hit in hits
                if hit_text(hit)
            ]
        )

    async def add_session_to_memory(self, session: Session) -> None:
        await self.client._driver.run(self._add_session(session))

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        if session_id is None:
            raise ValueError("session_id: the platform keeps events as turns of a session; name it")
        await self.client._driver.run(self._add_events(self._transcript(user_id, session_id), events, app_name))

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        for entry in memories:
            text = "\n".join(part.text for part in entry.content.parts or [] if part.text)
            if text.strip():
                name = str((custom_metadata or {}).get("name") or FACT_NAME)
                await self.client.memories.create("semantic", user_id, name=name, summary=text, source=app_name)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        return await self.client._driver.run(self._search(user_id, query))

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        memory_type, _, item_id = (memory_id or "").partition(":")
        if memory_type not in DELETABLE or not item_id:
            raise ValueError(
                f"memory_id: the id search_memory gave to a {', '.join(DELETABLE)} hit "
                f"(<memory_type>:<id>), not {memory_id!r}"
            )
        try:
            await self.client.delete_memory(memory_type, item_id)
        except NotFoundError:
            pass  # already gone
