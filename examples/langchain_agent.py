"""A LangChain 1.x agent (`create_agent`) that learns a workflow across runs, offline.

The model is scripted (LangChain's `GenericFakeChatModel`, recording each prompt it is sent); the
memory is a live platform. `MemoryMiddleware` puts the user's context and the learned skills into the
system message and saves each exchange; with `task=True` each run is a task session that ends with
its outcome, so the platform learns from it.

Three runs book a flight with the same tools; the platform distils them into a workflow skill. The
fourth run's prompt carries it, and the fact stored about the user.

    MEMORY_PLATFORM_URL=http://127.0.0.1:8000 MEMORY_PLATFORM_API_KEY=mp_... python examples/langchain_agent.py

Requires `pip install 'memory-platform-client[langchain]'` and a platform with a worker (`make run`)."""

import os
import sys
import time
import uuid

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from memory_platform_client import MemoryClient
from memory_platform_client.adapters.langchain import MemoryMiddleware
from pydantic import Field

REQUEST = "Please book me a flight to Lisbon for next Friday"
FACT = "Alice takes her flights from Porto (OPO) and prefers a window seat"


@tool
def get_user_details(user_id: str) -> str:
    """The customer's profile."""
    return f"{user_id}: gold member, home airport OPO"


@tool
def search_flights(origin: str, destination: str) -> str:
    """Flights between two airports."""
    return f"TP1943 {origin}->{destination} 09:10, TP1947 {origin}->{destination} 18:40"


@tool
def book_reservation(flight: str) -> str:
    """Books a seat on a flight."""
    return f"booked {flight}, confirmation ABC{flight[-3:]}"


class ScriptedModel(GenericFakeChatModel):
    """Answers from a script and keeps every prompt it was sent."""

    prompts: list = Field(default_factory=list)

    def _generate(self, messages, *args, **kwargs):
        self.prompts.append(messages)
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools, **kwargs):
        return self


def script(run: int) -> list[AIMessage]:
    """One run: look the customer up, search, book, confirm."""
    calls = [
        ("get_user_details", {"user_id": "alice"}),
        ("search_flights", {"origin": "OPO", "destination": "LIS"}),
        ("book_reservation", {"flight": "TP1943"}),
    ]
    steps = [
        AIMessage("", tool_calls=[{"id": f"run{run}-{n}", "name": name, "args": args}])
        for n, (name, args) in enumerate(calls)
    ]
    return [*steps, AIMessage("Booked TP1943 from Porto to Lisbon, Friday 09:10. Confirmation ABC943.")]


def run_agent(memory: MemoryClient, run: int, session_id: str) -> ScriptedModel:
    model = ScriptedModel(messages=iter(script(run)))
    middleware = MemoryMiddleware(memory, user_id="alice", session_id=session_id, task=True, outcome="success")
    agent = create_agent(
        model,
        tools=[get_user_details, search_flights, book_reservation],
        system_prompt="You are a travel agent. Use the tools to book flights.",
        middleware=[middleware],
    )
    agent.invoke({"messages": [{"role": "user", "content": REQUEST}]})
    return model


def wait_for_skill(memory: MemoryClient, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        skills = memory.skills.list(user_id="alice", status="active")
        if skills:
            return skills[0]
        time.sleep(1)
    sys.exit("no skill was learned within two minutes (is a worker running?)")


def main() -> None:
    url, key = os.environ["MEMORY_PLATFORM_URL"], os.environ["MEMORY_PLATFORM_API_KEY"]
    session_id = f"flight desk {uuid.uuid4().hex[:8]}"  # any string: the SDK maps it to a platform id
    with MemoryClient(url, api_key=key) as memory:
        memory.memories.create("semantic", "alice", name="travel preferences", summary=FACT)
        for run in range(1, 4):
            run_agent(memory, run, session_id)
        skill = wait_for_skill(memory)
        print(f"learned after three runs: {skill['name']}")

        model = run_agent(memory, 4, session_id)
        system = model.prompts[0][0].content
        print("the fourth run's first prompt starts with:\n" + system[:1500])
        assert FACT in system, "the stored fact is in the prompt"
        assert skill["name"] in system, "the learned skill is in the prompt"

        deadline = time.monotonic() + 10
        while not memory.search("alice", "Confirmation ABC943", memory_types=["message"])["count"]:
            assert time.monotonic() < deadline, "the exchange is searchable within 10 s"
            time.sleep(0.2)
        print("ok: fact and skill in the prompt; the exchange is searchable")


if __name__ == "__main__":
    main()
