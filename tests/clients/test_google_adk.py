"""Google ADK's memory service on the live platform, driven through ADK's own `Runner` with a scripted
model: `PreloadMemoryTool` puts what the platform knows of the user into the model's request, a session
added to memory (twice) leaves each event once as turns, a task session is sealed with its outcome,
`add_memory` and `delete_memory` go through, and another organisation finds nothing."""

import anyio
import pytest
from google.adk.agents import Agent
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models import BaseLlm, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from memory_platform_client import AsyncMemoryClient, Retries
from memory_platform_client.adapters._transcript import session_key
from memory_platform_client.adapters.google_adk import PlatformMemoryService
from pydantic import Field

from apps.conversations.models import Message, Session
from apps.memories.models import SemanticMemory

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=2, backoff=0.01, max_backoff=0.05)
FACT = "Alice takes her flights from Porto and prefers a window seat"


class ScriptedLlm(BaseLlm):
    """Answers every request with one text and keeps each request it was sent."""

    model: str = "scripted"
    requests: list = Field(default_factory=list)

    async def generate_content_async(self, llm_request, stream=False):
        self.requests.append(llm_request)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Booked from Porto, window.")]))


def _request_text(request) -> str:
    return "\n".join(part.text or "" for content in request.contents for part in content.parts or [])


async def _run(memory_service, llm, *, user_id="alice", text="Book me a flight to Lisbon"):
    sessions = InMemorySessionService()
    agent = Agent(name="travel_agent", model=llm, instruction="You book flights.", tools=[PreloadMemoryTool()])
    runner = Runner(app_name="travel", agent=agent, session_service=sessions, memory_service=memory_service)
    session = await sessions.create_session(app_name="travel", user_id=user_id, session_id=f"booking for {user_id}")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id=user_id, session_id=session.id, new_message=message):
        pass
    return await sessions.get_session(app_name="travel", user_id=user_id, session_id=session.id)


def test_the_runner_sees_the_users_memories_and_a_session_is_added_once(live_server, client_a):
    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
            await client.memories.create("semantic", "alice", name="travel preferences", summary=FACT)
            service, llm = PlatformMemoryService(async_client=client), ScriptedLlm()
            session = await _run(service, llm, text="Book me a flight: window seat from Porto please")
            await service.add_session_to_memory(session)
            await service.add_session_to_memory(session)  # ADK may add a session many times
            found = await service.search_memory(app_name="travel", user_id="alice", query="Booked from Porto window")
            return llm, found

    llm, found = anyio.run(scenario)

    assert FACT in _request_text(llm.requests[0]), "PreloadMemoryTool put the stored fact into the request"
    turns = Message.objects.filter(session__session_id=session_key("booking for alice")).order_by("seq")
    assert [(turn.role, turn.content) for turn in turns] == [
        ("user", "Book me a flight: window seat from Porto please"),
        ("assistant", "Booked from Porto, window."),
    ]
    assert turns[0].metadata["adk_app"] == "travel"
    texts = [part.text for entry in found.memories for part in entry.content.parts]
    assert "Booked from Porto, window." in texts and f"travel preferences: {FACT}" in texts
    assert {entry.id.split(":")[0] for entry in found.memories} >= {"message", "semantic"}


def test_a_task_session_is_sealed_with_its_outcome_and_memories_are_added_and_deleted(live_server, client_a):
    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
            service = PlatformMemoryService(
                async_client=client, task=True, outcome=lambda session: len(session.events) == 2
            )
            await service.add_session_to_memory(await _run(service, ScriptedLlm(), user_id="bob"))
            entry = MemoryEntry(content=types.Content(parts=[types.Part(text="Bob is allergic to peanuts")]))
            await service.add_memory(app_name="travel", user_id="bob", memories=[entry])
            found = await service.search_memory(app_name="travel", user_id="bob", query="allergic peanuts")
            fact = next(entry for entry in found.memories if entry.id.startswith("semantic:"))
            await service.delete_memory(app_name="travel", user_id="bob", memory_id=fact.id)
            await service.delete_memory(app_name="travel", user_id="bob", memory_id=fact.id)  # gone: no error
            with pytest.raises(ValueError, match="memory_id"):
                await service.delete_memory(app_name="travel", user_id="bob", memory_id="profile:1")

    anyio.run(scenario)

    session = Session.objects.get(session_id=session_key("booking for bob"))
    assert (session.session_tag, session.status, session.outcome) == ("task", "sealed", "success")
    assert not SemanticMemory.objects.filter(summary="Bob is allergic to peanuts").exists()


def test_another_organisation_finds_nothing(live_server, client_a, foreign_client):
    async def scenario():
        async with (
            AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as own,
            AsyncMemoryClient(live_server.url, foreign_client.raw_key, timeout=10, retries=FAST) as foreign,
        ):
            await own.memories.create("semantic", "alice", name="secret", summary="the vault code is 1234")
            theirs = PlatformMemoryService(async_client=foreign)
            return await theirs.search_memory(app_name="travel", user_id="alice", query="vault code")

    assert anyio.run(scenario).memories == []
