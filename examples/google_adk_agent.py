"""A Google ADK agent that learns a workflow across runs, offline.

The model is scripted (an ADK `BaseLlm` answering from a script and recording each request); the
memory is a live platform. `PlatformMemoryService(task=True)` is the runner's memory service: ADK's
`PreloadMemoryTool` puts what the platform finds for the request (facts, learned skills) into each
model request, and `add_session_to_memory(session)` after a run stores its events as a task session
and seals it with its outcome, so the platform learns from it.

Three runs book a flight with the same tools; the platform distils them into a workflow skill. The
fourth run's request carries it, and the fact stored about the user.

    MEMORY_PLATFORM_URL=http://127.0.0.1:8000 MEMORY_PLATFORM_API_KEY=mp_... python examples/google_adk_agent.py

Requires `pip install 'memory-platform-client[google-adk]'` and a platform with a worker (`make run`)."""

import asyncio
import os
import sys
import time
import uuid

from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from memory_platform_client import AsyncMemoryClient
from memory_platform_client.adapters.google_adk import PlatformMemoryService
from pydantic import Field

REQUEST = "Please book me a flight to Lisbon for next Friday"
FACT = "Alice takes her flights from Porto (OPO) and prefers a window seat"
USER = "alice"


def get_user_details(user_id: str) -> str:
    """The customer's profile."""
    return f"{user_id}: gold member, home airport OPO"


def search_flights(origin: str, destination: str) -> str:
    """Flights between two airports."""
    return f"TP1943 {origin}->{destination} 09:10, TP1947 {origin}->{destination} 18:40"


def book_reservation(flight: str) -> str:
    """Books a seat on a flight."""
    return f"booked {flight}, confirmation ABC{flight[-3:]}"


STEPS = [
    ("get_user_details", {"user_id": USER}),
    ("search_flights", {"origin": "OPO", "destination": "LIS"}),
    ("book_reservation", {"flight": "TP1943"}),
]


class ScriptedLlm(BaseLlm):
    """Look the customer up, search, book, confirm; keeps every request it was sent."""

    model: str = "scripted"
    requests: list = Field(default_factory=list)

    async def generate_content_async(self, llm_request, stream=False):
        self.requests.append(llm_request)
        step = len(self.requests) - 1
        if step < len(STEPS):
            name, args = STEPS[step]
            part = types.Part(function_call=types.FunctionCall(id=f"call-{step}", name=name, args=args))
        else:
            part = types.Part(text="Booked TP1943 from Porto to Lisbon, Friday 09:10. Confirmation ABC943.")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def request_text(request) -> str:
    return "\n".join(part.text or "" for content in request.contents for part in content.parts or [])


async def run_agent(memory: AsyncMemoryClient, run: int, desk: str) -> ScriptedLlm:
    llm, sessions = ScriptedLlm(), InMemorySessionService()
    service = PlatformMemoryService(
        async_client=memory,
        task=True,
        outcome=lambda session: "Confirmation" in (session.events[-1].content.parts[0].text or ""),
    )
    agent = Agent(
        name="travel_agent",
        model=llm,
        instruction="You are a travel agent. Use the tools to book flights.",
        tools=[PreloadMemoryTool(), get_user_details, search_flights, book_reservation],
    )
    runner = Runner(app_name="travel", agent=agent, session_service=sessions, memory_service=service)
    session = await sessions.create_session(app_name="travel", user_id=USER, session_id=f"{desk} run {run}")
    message = types.Content(role="user", parts=[types.Part(text=REQUEST)])
    async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
        pass
    # Closes the skill loop: the run's events as a task session, sealed with its outcome.
    await service.add_session_to_memory(
        await sessions.get_session(app_name="travel", user_id=USER, session_id=session.id)
    )
    return llm


async def wait_for_skill(memory: AsyncMemoryClient, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        skills = await memory.skills.list(user_id=USER, status="active")
        if skills:
            return skills[0]
        await asyncio.sleep(1)
    sys.exit("no skill was learned within two minutes (is a worker running?)")


async def main() -> None:
    url, key = os.environ["MEMORY_PLATFORM_URL"], os.environ["MEMORY_PLATFORM_API_KEY"]
    desk = f"flight desk {uuid.uuid4().hex[:8]}"
    async with AsyncMemoryClient(url, api_key=key) as memory:
        await memory.memories.create("semantic", USER, name="travel preferences", summary=FACT)
        for run in range(1, 4):
            await run_agent(memory, run, desk)
        skill = await wait_for_skill(memory)
        print(f"learned after three runs: {skill['name']}")

        llm = await run_agent(memory, 4, desk)
        prompt = request_text(llm.requests[0])
        print("the fourth run's first request carries:\n" + prompt[:1500])
        assert FACT in prompt, "the stored fact is in the prompt"
        assert skill["name"] in prompt, "the learned skill is in the prompt"

        deadline = time.monotonic() + 10
        while not (await memory.search(USER, "Confirmation ABC943", memory_types=["message"]))["count"]:
            assert time.monotonic() < deadline, "the exchange is searchable within 10 s"
            await asyncio.sleep(0.2)
        print("ok: fact and skill in the prompt; the exchange is searchable")


if __name__ == "__main__":
    asyncio.run(main())
