"""An OpenAI Agents SDK agent that learns a workflow across runs, offline.

The model is a scripted `agents.Model` (recording the instructions it is sent); the memory is a live
platform. `PlatformSession` keeps each run's items as a task session, `session.instructions(...)` adds
the user's context and the learned skills to the agent's instructions before each model call, and
`session.finish(result)` ends the run with its outcome, so the platform learns from it.

Three runs book a flight with the same tools; the platform distils them into a workflow skill. The
fourth run's instructions carry it, and the fact stored about the user.

    MEMORY_PLATFORM_URL=http://127.0.0.1:8000 MEMORY_PLATFORM_API_KEY=mp_... python examples/openai_agents_agent.py

Requires `pip install 'memory-platform-client[openai-agents]'` and a platform with a worker (`make run`)."""

import asyncio
import json
import os
import sys
import time
import uuid

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from memory_platform_client import AsyncMemoryClient
from memory_platform_client.adapters.openai_agents import PlatformSession
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

USER = "alice"
REQUEST = "Please book me a flight to Lisbon for next Friday"
FACT = "Alice takes her flights from Porto (OPO) and prefers a window seat"


@function_tool
def get_user_details(user_id: str) -> str:
    """The customer's profile."""
    return f"{user_id}: gold member, home airport OPO"


@function_tool
def search_flights(origin: str, destination: str) -> str:
    """Flights between two airports."""
    return f"TP1943 {origin}->{destination} 09:10, TP1947 {origin}->{destination} 18:40"


@function_tool
def book_reservation(flight: str) -> str:
    """Books a seat on a flight."""
    return f"booked {flight}, confirmation ABC{flight[-3:]}"


STEPS = [
    ("get_user_details", {"user_id": USER}),
    ("search_flights", {"origin": "OPO", "destination": "LIS"}),
    ("book_reservation", {"flight": "TP1943"}),
]
ANSWER = "Booked TP1943 from Porto to Lisbon, Friday 09:10. Confirmation ABC943."


class ScriptedModel(Model):
    """Calls the three tools in turn, then answers; keeps the instructions of every call."""

    def __init__(self, run: int):
        self.run, self.calls, self.instructions = run, 0, []

    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:
        self.instructions.append(system_instructions or "")
        step, self.calls = self.calls, self.calls + 1
        if step < len(STEPS):
            name, arguments = STEPS[step]
            call_id = f"run{self.run}-{step}"
            output = ResponseFunctionToolCall(
                type="function_call", id=f"fc_{call_id}", call_id=call_id, name=name, arguments=json.dumps(arguments)
            )
        else:
            text = ResponseOutputText(type="output_text", text=ANSWER, annotations=[])
            output = ResponseOutputMessage(
                type="message", id=f"msg_run{self.run}", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("this example runs without streaming")


async def run_agent(memory: AsyncMemoryClient, run: int) -> ScriptedModel:
    # One task session per run; any string is a session id (the SDK maps it to a platform id).
    session = PlatformSession(
        f"booking #{run} {uuid.uuid4().hex[:6]}", user_id=USER, client=memory, session_tag="task", outcome="success"
    )
    model = ScriptedModel(run)
    agent = Agent(
        name="travel agent",
        instructions=session.instructions("You are a travel agent. Use the tools to book flights."),
        model=model,
        tools=[get_user_details, search_flights, book_reservation],
    )
    result = await Runner.run(agent, REQUEST, session=session, run_config=RunConfig(tracing_disabled=True))
    await session.finish(result)
    return model


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
    async with AsyncMemoryClient(url, api_key=key) as memory:
        await memory.memories.create("semantic", USER, name="travel preferences", summary=FACT)
        for run in range(1, 4):
            await run_agent(memory, run)
        skill = await wait_for_skill(memory)
        print(f"learned after three runs: {skill['name']}")

        model = await run_agent(memory, 4)
        instructions = model.instructions[0]
        print("the fourth run's first instructions:\n" + instructions[:1500])
        assert FACT in instructions, "the stored fact is in the prompt"
        assert skill["name"] in instructions, "the learned skill is in the prompt"

        deadline = time.monotonic() + 10
        while not (await memory.search(USER, "Confirmation ABC943", memory_types=["message"]))["count"]:
            assert time.monotonic() < deadline, "the exchange is searchable within 10 s"
            await asyncio.sleep(0.2)
        print("ok: fact and skill in the prompt; the exchange is searchable")


if __name__ == "__main__":
    asyncio.run(main())
