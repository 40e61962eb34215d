"""The SDK's framework adapters against the live platform, each driven through its framework's own
entry points: LangGraph's store API, the Agents SDK's session methods and `Runner` (its model on
harness/fake_openai.py), LangChain's `RunnableWithMessageHistory`; and tenancy through each."""

import threading
from typing import TypedDict

import anyio
import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from django.db import connection
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import InvalidNamespaceError
from memory_platform_client import AsyncMemoryClient, MemoryClient, Retries, TaskTimeoutError
from memory_platform_client.adapters.langchain_history import PlatformChatMessageHistory
from memory_platform_client.adapters.langgraph_store import PlatformStore
from memory_platform_client.adapters.openai_agents import PlatformSession
from memory_platform_client.adapters.skill_loop import session_key
from openai import AsyncOpenAI
from pydantic import BaseModel

from apps.conversations.models import Message, Session
from apps.conversations.routing import DELETE_SESSION
from apps.memories.models import SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from harness.fake_openai import FakeOpenAI
from tests.factories import ClientFactory
from tests.memories.makers import semantic

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=2, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def sdk(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        yield client


@pytest.fixture
def stranger(live_server, foreign_client):
    """A client of another organisation, writing the same scope name and the same user ids."""
    with MemoryClient(live_server.url, foreign_client.raw_key, timeout=10, retries=FAST) as client:
        yield client


@pytest.fixture
def purger():
    """Runs each session purge the platform queues, in a thread of its own, as a worker would: a
    clear waits for it. (A real Celery worker in-process leaves its database session open.)"""
    stop = threading.Event()

    def purge():
        try:
            while not stop.wait(0.05):
                queued = MemoryTask.objects.filter(task_type=DELETE_SESSION, status=MemoryTask.Status.QUEUED)
                for task_id in queued.values_list("pk", flat=True):
                    task_execute(task_id=task_id, worker="test-purger")
        finally:
            connection.close()

    thread = threading.Thread(target=purge, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


def _async(live_server, client):
    return AsyncMemoryClient(live_server.url, client.raw_key, timeout=10, retries=FAST)


# LangGraph -----------------------------------------------------------------------------------------


def test_langgraph_store_put_get_search_delete(sdk, client_a):
    store = PlatformStore(client=sdk)
    store.put(("alice", "memories"), "sister", {"text": "Ana, my sister, lives in Lisbon", "kind": "family"})
    store.put(("alice", "memories"), "pet", {"text": "My cat is called Miso", "kind": "pets", "age": 3})
    store.put(("alice", "prefs", "food"), "likes", {"text": "loves grilled sardines"}, index=["text"])
    store.put(("bob", "memories"), "sister", {"text": "Bob has no sister"})

    item = store.get(("alice", "memories"), "sister")
    assert item.value == {"text": "Ana, my sister, lives in Lisbon", "kind": "family"}
    assert (item.namespace, item.key) == (("alice", "memories"), "sister")
    assert store.get(("alice", "memories"), "nobody") is None and store.get(("carol",), "sister") is None

    store.put(("alice", "memories"), "sister", {"text": "Ana, my sister, moved to Porto", "kind": "family"})
    again = store.get(("alice", "memories"), "sister")
    assert again.value["text"] == "Ana, my sister, moved to Porto" and again.created_at == item.created_at
    assert again.updated_at > item.updated_at
    stored = SemanticMemory.objects.get(name="memories/sister", end_user__user_id="alice")
    assert stored.summary == "Ana, my sister, moved to Porto\nfamily" and stored.scope == "default"

    hits = store.search(("alice",), query="where does my sister live Porto")
    assert hits[0].key == "sister" and hits[0].score > 0
    assert {hit.key for hit in hits} <= {"sister", "pet", "likes"}
    assert [hit.key for hit in store.search(("alice", "memories"), filter={"kind": "pets"})] == ["pet"]
    assert [hit.key for hit in store.search(("alice", "memories"), filter={"age": {"$gte": 3}})] == ["pet"]
    assert store.search(("alice", "memories"), filter={"age": {"$gt": 3}}) == []
    assert {hit.key for hit in store.search(("alice", "prefs"))} == {"likes"}
    assert len(store.search(("alice",), limit=2)) == 2 and len(store.search(("alice",), limit=2, offset=2)) == 1
    everyone = store.search((), query="sister")
    assert {(hit.namespace[0], hit.key) for hit in everyone[:2]} == {("alice", "sister"), ("bob", "sister")}

    assert store.list_namespaces(prefix=("alice",)) == [("alice", "memories"), ("alice", "prefs", "food")]
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == [("alice", "memories"), ("alice", "prefs")]
    assert store.list_namespaces(prefix=("alice",), suffix=("food",)) == [("alice", "prefs", "food")]
    with pytest.raises(ValueError, match="needs the user"):
        store.list_namespaces()

    store.delete(("alice", "memories"), "pet")
    assert store.get(("alice", "memories"), "pet") is None
    assert not SemanticMemory.objects.filter(name="memories/pet").exists()
    with pytest.raises(InvalidNamespaceError):
        store.put(("alice.smith",), "k", {"text": "dots are refused by LangGraph"})
    with pytest.raises(ValueError, match="at most 4000"):
        store.put(("alice",), "huge", {"text": "x" * 5000})


def test_langgraph_store_ignores_learned_memories_and_is_async(live_server, sdk, client_a):
    semantic(client_a.organization, "default", "alice", "sister", "Ana lives in Lisbon")  # learned, not a store item

    async def scenario():
        async with _async(live_server, client_a) as memory:
            store = PlatformStore(async_client=memory)
            await store.aput(("alice", "notes"), "n1", {"text": "Ana lives in Lisbon, says the note"})
            return {
                "get": await store.aget(("alice", "notes"), "n1"),
                "search": await store.asearch(("alice",), query="Ana Lisbon"),
                "listed": await store.asearch(("alice",)),
                "namespaces": await store.alist_namespaces(prefix=("alice",)),
                "deleted": await store.adelete(("alice", "notes"), "n1"),
                "after": await store.aget(("alice", "notes"), "n1"),
            }

    results = anyio.run(scenario)

    assert results["get"].value == {"text": "Ana lives in Lisbon, says the note"}
    assert [hit.key for hit in results["search"]] == ["n1"] == [hit.key for hit in results["listed"]]
    assert results["namespaces"] == [("alice", "notes")] and results["after"] is None
    assert SemanticMemory.objects.filter(name="sister").exists()
    with pytest.raises(RuntimeError, match="no blocking client"):
        PlatformStore(async_client=object()).get(("alice",), "n1")


def test_langgraph_store_of_another_organisation_sees_nothing(sdk, stranger):
    PlatformStore(client=sdk).put(("alice", "memories"), "secret", {"text": "the vault code is 1234"})
    theirs = PlatformStore(client=stranger)

    assert theirs.get(("alice", "memories"), "secret") is None
    assert theirs.search(("alice",), query="vault code") == [] and theirs.search((), query="vault code") == []
    assert theirs.list_namespaces(prefix=("alice",)) == []
    theirs.delete(("alice", "memories"), "secret")
    assert PlatformStore(client=sdk).get(("alice", "memories"), "secret").value == {"text": "the vault code is 1234"}


class NoteState(TypedDict):
    user: str
    note: str
    recalled: list


def test_a_langgraph_graph_reads_and_writes_the_store(live_server, sdk, client_a):
    def remember(state: NoteState):
        store = get_store()
        store.put((state["user"], "notes"), f"note-{len(state['recalled'])}", {"text": state["note"]})
        return {"recalled": [hit.value["text"] for hit in store.search((state["user"],), query=state["note"])]}

    async def scenario(graph):
        async with _async(live_server, client_a) as memory:
            graph = graph.compile(store=PlatformStore(client=sdk, async_client=memory))
            first = graph.invoke({"user": "alice", "note": "Ana lives in Lisbon", "recalled": []})
            second = await graph.ainvoke({"user": "alice", "note": "Ana paints", "recalled": ["x"]})
            return first, second

    builder = StateGraph(NoteState).add_node(remember).add_edge(START, "remember").add_edge("remember", END)
    first, second = anyio.run(scenario, builder)

    assert first["recalled"] == ["Ana lives in Lisbon"]
    assert sorted(second["recalled"]) == ["Ana lives in Lisbon", "Ana paints"]
    assert sorted(SemanticMemory.objects.values_list("name", flat=True)) == ["notes/note-0", "notes/note-1"]


def test_langgraph_store_writes_only_its_own_scope(live_server, sdk, client_a):
    both = ClientFactory(organization=client_a.organization, write_scope="beta", read_scopes=["default", "beta"])
    PlatformStore(client=sdk).put(("alice",), "plan", {"text": "default's plan"})

    with MemoryClient(live_server.url, both.raw_key, timeout=10, retries=FAST) as memory:
        store = PlatformStore(client=memory)
        before = store.get(("alice",), "plan").value
        store.put(("alice",), "plan", {"text": "beta's plan"})
        own = store.get(("alice",), "plan").value
        listed = sorted(hit.value["text"] for hit in store.search(("alice",)))
        store.delete(("alice",), "plan")
        after = store.get(("alice",), "plan").value

    assert before == {"text": "default's plan"} == after and own == {"text": "beta's plan"}
    assert listed == ["beta's plan", "default's plan"]
    assert list(SemanticMemory.objects.values_list("scope", flat=True)) == ["default"]


# OpenAI Agents SDK ---------------------------------------------------------------------------------

AGENT_ITEMS = [
    {"role": "user", "content": "What's the weather in Lisbon?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "21°C and sunny"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is 21°C and sunny.", "annotations": []}],
    },
]


def test_agents_session_methods(live_server, client_a):
    async def scenario():
        async with _async(live_server, client_a) as memory:
            session = PlatformSession("chat-1", user_id="alice", client=memory)
            empty = await session.get_items()
            await session.add_items(AGENT_ITEMS)
            everything = await session.get_items()
            latest = await session.get_items(limit=2)
            popped = await session.pop_item()
            after_pop = await session.get_items()
            return empty, everything, latest, popped, after_pop

    empty, everything, latest, popped, after_pop = anyio.run(scenario)

    assert empty == [] and everything == AGENT_ITEMS and latest == AGENT_ITEMS[2:]
    assert popped == AGENT_ITEMS[3] and after_pop == AGENT_ITEMS[:3]
    turns = list(Message.objects.filter(session__session_id="chat-1").order_by("seq"))
    assert [turn.role for turn in turns] == ["user", "assistant", "tool"]
    assert (
        turns[1].tool_calls[0]["function"]["name"] == "get_weather"
        and turns[2].content == "[get_weather] 21°C and sunny"
    )


def test_agents_session_continues_past_a_sealed_session_and_reads_foreign_turns(live_server, sdk, client_a):
    sdk.add("alice", "chat-1", [{"role": "user", "content": "Hello from the SDK"}], seal=True)

    async def scenario():
        async with _async(live_server, client_a) as memory:
            session = PlatformSession("chat-1", user_id="alice", client=memory)
            await session.add_items([{"role": "user", "content": "Still there?"}])
            other = PlatformSession("chat-2", user_id="alice", client=memory)
            await other.add_items([{"role": "user", "content": "A second conversation seals the first"}])
            await session.add_items([{"role": "assistant", "content": "Yes."}])
            return await session.get_items(), await session.get_items(limit=2)

    items, latest = anyio.run(scenario)

    assert items == [
        {"role": "user", "content": "Hello from the SDK"},
        {"role": "user", "content": "Still there?"},
        {"role": "assistant", "content": "Yes."},
    ]
    assert latest == items[1:]
    assert sorted(Session.objects.values_list("session_id", flat=True)) == [
        "chat-1",
        "chat-1--2",
        "chat-1--3",
        "chat-2",
    ]


def test_agents_session_clear_waits_for_the_purge(live_server, client_a, purger):
    async def scenario():
        async with _async(live_server, client_a) as memory:
            session = PlatformSession("chat-1", user_id="alice", client=memory, clear_timeout=60)
            await session.add_items(AGENT_ITEMS[:1])
            await session.clear_session()
            cleared = await session.get_items()
            await session.add_items([{"role": "user", "content": "A fresh start"}])
            return cleared, await session.get_items()

    cleared, fresh = anyio.run(scenario)

    assert cleared == [] and fresh == [{"role": "user", "content": "A fresh start"}]
    assert list(Message.objects.values_list("content", flat=True)) == ["A fresh start"]


class Answer(BaseModel):
    reply: str


def test_an_agents_runner_keeps_its_history_in_the_platform(live_server, client_a):
    fake = FakeOpenAI().start()
    fake.add_json({"reply": "Nice to meet you, Alice."})
    fake.add_json({"reply": "Your name is Alice."})

    async def scenario():
        async with _async(live_server, client_a) as memory:
            model = OpenAIChatCompletionsModel(
                model="fake-model", openai_client=AsyncOpenAI(base_url=fake.base_url, api_key="test-key")
            )
            agent = Agent(name="assistant", instructions="Be brief.", model=model, output_type=Answer)
            session = PlatformSession("chat-1", user_id="alice", client=memory)
            config = RunConfig(tracing_disabled=True)
            first = await Runner.run(agent, "Hi, I am Alice.", session=session, run_config=config)
            second = await Runner.run(agent, "What is my name?", session=session, run_config=config)
            return first.final_output, second.final_output, await session.get_items()

    try:
        first, second, items = anyio.run(scenario)
    finally:
        fake.stop()

    assert (first.reply, second.reply) == ("Nice to meet you, Alice.", "Your name is Alice.")
    # The second run sent the first exchange, read back from the platform, to the model.
    sent = [message.get("content") for message in fake.chat_requests()[1]["messages"]]
    assert "Hi, I am Alice." in sent and "What is my name?" in sent
    assert any("Nice to meet you, Alice." in str(content) for content in sent)
    assert [item.get("role") for item in items] == ["user", "assistant", "user", "assistant"]
    assert list(Message.objects.order_by("seq").values_list("content", flat=True))[0] == "Hi, I am Alice."


def test_agents_session_of_another_organisation_sees_nothing(live_server, client_a, foreign_client):
    async def scenario():
        async with _async(live_server, client_a) as ours, _async(live_server, foreign_client) as theirs:
            await PlatformSession("chat-1", user_id="alice", client=ours).add_items(AGENT_ITEMS)
            intruder = PlatformSession("chat-1", user_id="alice", client=theirs)
            seen = await intruder.get_items()
            popped = await intruder.pop_item()
            await intruder.add_items([{"role": "user", "content": "their own turn"}])
            return seen, popped, await PlatformSession("chat-1", user_id="alice", client=ours).get_items()

    seen, popped, ours = anyio.run(scenario)

    assert seen == [] and popped is None and ours == AGENT_ITEMS
    assert Message.objects.filter(session__organization=client_a.organization).count() == 4


def test_a_clear_nobody_purges_ends_in_a_timeout(live_server, client_a):
    async def scenario():
        async with _async(live_server, client_a) as memory:
            session = PlatformSession("chat-1", user_id="alice", client=memory, clear_timeout=0.3)
            await session.add_items(AGENT_ITEMS[:1])
            await session.clear_session()

    with pytest.raises(TaskTimeoutError) as timed_out:
        anyio.run(scenario)
    assert timed_out.value.task["status"] == "queued"


# LangChain -----------------------------------------------------------------------------------------


def test_langchain_history_with_runnable_with_message_history(sdk, client_a):
    def reply(messages):
        return AIMessage(f"You said {len(messages)} things; the last was: {messages[-1].content}")

    chain = RunnableWithMessageHistory(
        RunnableLambda(reply), lambda session_id: PlatformChatMessageHistory(session_id, user_id="alice", client=sdk)
    )
    config = {"configurable": {"session_id": "chat-1"}}
    chain.invoke([HumanMessage("My sister lives in Lisbon.")], config=config)
    second = chain.invoke([HumanMessage("Where does she live?")], config=config)

    assert second.content == "You said 3 things; the last was: Where does she live?"
    history = PlatformChatMessageHistory("chat-1", user_id="alice", client=sdk)
    assert [(m.type, m.content) for m in history.messages] == [
        ("human", "My sister lives in Lisbon."),
        ("ai", "You said 1 things; the last was: My sister lives in Lisbon."),
        ("human", "Where does she live?"),
        ("ai", "You said 3 things; the last was: Where does she live?"),
    ]
    assert sdk.search("alice", "sister Lisbon", memory_types=["message"])["count"] >= 1


def test_langchain_history_keeps_tool_calls_and_is_async(live_server, sdk, client_a, foreign_client):
    call = AIMessage("", tool_calls=[{"id": "call_1", "name": "get_weather", "args": {"city": "Lisbon"}}])
    messages = [HumanMessage("Weather in Lisbon?"), call, ToolMessage("21°C", tool_call_id="call_1"), AIMessage("")]

    async def scenario():
        async with _async(live_server, client_a) as memory, _async(live_server, foreign_client) as theirs:
            history = PlatformChatMessageHistory("job-1", user_id="alice", async_client=memory, session_tag="task")
            await history.aadd_messages(messages)
            stored = await history.aget_messages()
            foreign = await PlatformChatMessageHistory("job-1", user_id="alice", async_client=theirs).aget_messages()
            return stored, foreign

    stored, foreign = anyio.run(scenario)

    assert stored == messages and foreign == []
    assert Session.objects.get(session_id="job-1").session_tag == "task"
    assert Message.objects.get(seq=4).content == "[empty ai message]"
    sdk.add("alice", "chat-9", [{"role": "user", "content": "plain turn"}])
    assert [
        (m.type, m.content) for m in PlatformChatMessageHistory("chat-9", user_id="alice", client=sdk).messages
    ] == [("human", "plain turn")]


def test_langchain_history_clear(sdk, client_a, purger):
    history = PlatformChatMessageHistory("chat-1", user_id="alice", client=sdk, clear_timeout=60)
    history.add_messages([HumanMessage("forget me")])

    history.clear()

    assert history.messages == [] and not Message.objects.exists()


def test_langchain_and_agents_session_ids_may_be_any_string(live_server, sdk, client_a):
    """The frameworks take any string; the platform keeps `session_key(id)`, the caller's id is kept."""
    ids = ["chat 42", "alice@example.com", "a conversation id of more than sixty characters, spaces and all"]
    for session_id in ids:
        history = PlatformChatMessageHistory(session_id, user_id="alice", client=sdk)
        history.add_messages([HumanMessage(f"hello from {session_id}")])
        assert history.session_id == session_id and history.messages == [HumanMessage(f"hello from {session_id}")]

    async def scenario():
        async with _async(live_server, client_a) as memory:
            session = PlatformSession("chat 42", user_id="bob", client=memory)
            await session.add_items(AGENT_ITEMS[:1])
            return session.session_id, await session.get_items()

    assert anyio.run(scenario) == ("chat 42", AGENT_ITEMS[:1])
    stored = set(Session.objects.values_list("session_id", flat=True))
    assert stored == {session_key(session_id) for session_id in ids} and session_key("chat 42").startswith("chat-42_")
