"""The LangGraph checkpointer against the live platform: LangGraph's own conformance suite
(`langgraph-checkpoint-conformance`, every base capability), a compiled graph run with it (each message
of the thread once in the user's session, blocking and async), and tenancy."""

import anyio
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.graph import START, MessagesState, StateGraph
from memory_platform_client import AsyncMemoryClient, MemoryClient, Retries
from memory_platform_client.adapters._transcript import session_key
from memory_platform_client.adapters.langgraph_checkpoint import PlatformCheckpointer

from apps.conversations.models import Checkpoint, Message

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=2, backoff=0.01, max_backoff=0.05)


def test_the_conformance_suite_passes_every_base_capability(live_server, client_a):
    @checkpointer_test(name="PlatformCheckpointer")
    async def platform_checkpointer():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as async_client:
            yield PlatformCheckpointer(async_client=async_client, user_id="conformance")

    report = anyio.run(lambda: validate(platform_checkpointer))
    results = {name: report.results[name.value] for name in BASE_CAPABILITIES}
    failures = {name: result.failures for name, result in results.items() if not result.passed}
    assert not failures, failures
    assert all(result.tests_passed > 0 for result in results.values())


def _chat_graph():
    """A graph whose node answers each human message (a scripted model)."""

    def answer(state: MessagesState):
        return {"messages": [AIMessage(f"noted: {state['messages'][-1].content}")]}

    return StateGraph(MessagesState).add_node("answer", answer).add_edge(START, "answer")


def test_a_graph_run_leaves_each_message_of_the_thread_once_in_the_session(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        graph = _chat_graph().compile(checkpointer=PlatformCheckpointer(client=client, user_id="alice"))
        config = {"configurable": {"thread_id": "trip 42 / alice@example.com"}}
        graph.invoke({"messages": [HumanMessage("I fly to Lisbon on Friday")]}, config)
        state = graph.invoke({"messages": [HumanMessage("Book a window seat")]}, config)

    assert [message.content for message in state["messages"]] == [
        "I fly to Lisbon on Friday",
        "noted: I fly to Lisbon on Friday",
        "Book a window seat",
        "noted: Book a window seat",
    ]
    turns = Message.objects.filter(session__session_id=session_key("trip 42 / alice@example.com")).order_by("seq")
    assert [(turn.role, turn.content) for turn in turns] == [
        ("user", "I fly to Lisbon on Friday"),
        ("assistant", "noted: I fly to Lisbon on Friday"),
        ("user", "Book a window seat"),
        ("assistant", "noted: Book a window seat"),
    ]
    assert Checkpoint.objects.filter(end_user__user_id="alice").count() > 4  # each step, more than once per message


def test_an_async_graph_resumes_its_state_from_the_platform(live_server, client_a):
    async def run():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
            config = {"configurable": {"thread_id": "chat-7"}}
            first = _chat_graph().compile(checkpointer=PlatformCheckpointer(async_client=client, user_id="bob"))
            await first.ainvoke({"messages": [HumanMessage("hello")]}, config)
            # A new graph object, as after a restart: the thread's state comes back from the platform.
            second = _chat_graph().compile(checkpointer=PlatformCheckpointer(async_client=client, user_id="bob"))
            return await second.ainvoke({"messages": [HumanMessage("again")]}, config)

    state = anyio.run(run)
    assert [message.content for message in state["messages"]] == ["hello", "noted: hello", "again", "noted: again"]
    assert Message.objects.filter(session__session_id="chat-7").count() == 4


def test_another_organisation_sees_no_checkpoint_and_deletes_none(live_server, client_a, foreign_client):
    with (
        MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as own,
        MemoryClient(live_server.url, foreign_client.raw_key, timeout=10, retries=FAST) as foreign,
    ):
        config = {"configurable": {"thread_id": "shared-name"}}
        _chat_graph().compile(checkpointer=PlatformCheckpointer(client=own, user_id="alice")).invoke(
            {"messages": [HumanMessage("mine")]}, config
        )
        stranger = PlatformCheckpointer(client=foreign, user_id="alice")
        assert stranger.get_tuple(config) is None
        assert list(stranger.list(None)) == []
        stranger.delete_thread("shared-name")
        assert PlatformCheckpointer(client=own, user_id="alice").get_tuple(config) is not None
