"""A LangGraph graph that learns a workflow across runs, offline: the platform is its checkpointer
(short-term memory: each thread's state) and its store (long-term memory), and closes the skill loop.

The model is scripted (it records each prompt it is sent); the memory is a live platform.
`PlatformCheckpointer(session_tag="task")` keeps each run's state and copies its messages, once each,
into a task session; `checkpointer.finish(...)` ends the run with its outcome, so the platform distils
a skill from it. The model node puts `SkillLoop.prompt(...)` (the user's context and the learned
skills, delimited as data) and the user's past bookings from `PlatformStore` into the system message.

Three runs book a flight with the same tools; the platform learns the workflow. The fourth run's
prompt carries it, and the fact stored about the user.

    MEMORY_PLATFORM_URL=http://127.0.0.1:8000 MEMORY_PLATFORM_API_KEY=mp_... python examples/langgraph_agent.py

Requires `pip install 'memory-platform-client[langgraph]'` and a platform with a worker (`make run`)."""

import os
import sys
import time
import uuid

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from memory_platform_client import MemoryClient
from memory_platform_client.adapters.langgraph_checkpoint import PlatformCheckpointer
from memory_platform_client.adapters.langgraph_store import PlatformStore
from memory_platform_client.adapters.skill_loop import SkillLoop, tools_named

REQUEST = "Please book me a flight to Lisbon for next Friday"
FACT = "Alice takes her flights from Porto (OPO) and prefers a window seat"
USER = "alice"


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
    """Books a seat on a flight, and remembers it in the store."""
    get_store().put((USER, "bookings"), flight, {"text": f"booked {flight} Porto -> Lisbon"})
    return f"booked {flight}, confirmation ABC{flight[-3:]}"


TOOLS = [get_user_details, search_flights, book_reservation]


class ScriptedModel:
    """Answers from a script (look the customer up, search, book, confirm) and keeps every prompt."""

    def __init__(self, run: int):
        calls = [
            ("get_user_details", {"user_id": USER}),
            ("search_flights", {"origin": "OPO", "destination": "LIS"}),
            ("book_reservation", {"flight": "TP1943"}),
        ]
        self.answers = [
            AIMessage("", tool_calls=[{"id": f"run{run}-{n}", "name": name, "args": args}])
            for n, (name, args) in enumerate(calls)
        ]
        self.answers.append(AIMessage("Booked TP1943 from Porto to Lisbon, Friday 09:10. Confirmation ABC943."))
        self.prompts: list[list] = []

    def invoke(self, messages: list) -> AIMessage:
        self.prompts.append(messages)
        return self.answers[len(self.prompts) - 1]


def build_graph(model: ScriptedModel, memory: MemoryClient, loop: SkillLoop, served: dict):
    def agent(state: MessagesState):
        block = loop.prompt(memory, REQUEST)  # fetched once per request, shared by its model calls
        served.update((skill["id"], skill) for skill in block.skills)
        bookings = [item.value["text"] for item in get_store().search((USER, "bookings"))]
        system = "You are a travel agent. Use the tools to book flights."
        system += f"\n\n{block.text}" if block.text else ""
        system += "\n\nPast bookings: " + "; ".join(bookings) if bookings else ""
        return {"messages": [model.invoke([SystemMessage(system), *state["messages"]])]}

    builder = StateGraph(MessagesState).add_node("agent", agent).add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "agent").add_conditional_edges("agent", tools_condition).add_edge("tools", "agent")
    return builder


def run_graph(memory: MemoryClient, run: int, desk: str) -> ScriptedModel:
    thread_id = f"{desk} run {run}"  # any string: the SDK maps it to a platform session id
    model = ScriptedModel(run)
    loop, served = SkillLoop(user_id=USER, session_id=thread_id, task=True), {}
    checkpointer = PlatformCheckpointer(client=memory, user_id=USER, session_tag="task")
    graph = build_graph(model, memory, loop, served)
    graph = graph.compile(checkpointer=checkpointer, store=PlatformStore(client=memory))
    config = {"configurable": {"thread_id": thread_id}}
    state = graph.invoke({"messages": [{"role": "user", "content": REQUEST}]}, config)
    # Close the skill loop: the outcome (here decided from the final state), the served skills whose
    # tools the run called, and the seal that sends the run to distillation.
    called = [call["name"] for message in state["messages"] for call in getattr(message, "tool_calls", [])]
    checkpointer.finish(
        config,
        outcome=lambda final: "Confirmation" in final["messages"][-1].content,
        applied=[skill_id for skill_id, skill in served.items() if tools_named(skill, called)],
    )
    return model


def wait_for_skill(memory: MemoryClient, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        skills = memory.skills.list(user_id=USER, status="active")
        if skills:
            return skills[0]
        time.sleep(1)
    sys.exit("no skill was learned within two minutes (is a worker running?)")


def main() -> None:
    url, key = os.environ["MEMORY_PLATFORM_URL"], os.environ["MEMORY_PLATFORM_API_KEY"]
    desk = f"flight desk {uuid.uuid4().hex[:8]}"
    with MemoryClient(url, api_key=key) as memory:
        memory.memories.create("semantic", USER, name="travel preferences", summary=FACT)
        for run in range(1, 4):
            run_graph(memory, run, desk)
        skill = wait_for_skill(memory)
        print(f"learned after three runs: {skill['name']}")

        model = run_graph(memory, 4, desk)
        system = model.prompts[0][0].content
        print("the fourth run's first prompt starts with:\n" + system[:1500])
        assert FACT in system, "the stored fact is in the prompt"
        assert skill["name"] in system, "the learned skill is in the prompt"
        assert "Past bookings: booked TP1943" in system, "the store's item is in the prompt"

        deadline = time.monotonic() + 10
        while not memory.search(USER, "Confirmation ABC943", memory_types=["message"])["count"]:
            assert time.monotonic() < deadline, "the exchange is searchable within 10 s"
            time.sleep(0.2)
        print("ok: fact and skill in the prompt; the exchange is searchable")


if __name__ == "__main__":
    main()
