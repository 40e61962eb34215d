"""Memory in the agent loop, through each framework's own extension point against the live platform:
LangChain 1.x `create_agent(..., middleware=[MemoryMiddleware(...)])` (sync and async) and the OpenAI
Agents SDK's `instructions` callable beside its `Session`. A scripted model records its prompts: they
carry a fact stored for the user and a skill; each message of the exchange is saved once, searchable
at once; a task run ends sealed with its outcome and its applied skill."""

import json

import anyio
import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from memory_platform_client import AsyncMemoryClient, MemoryClient, Retries
from memory_platform_client.adapters.langchain import MemoryMiddleware
from memory_platform_client.adapters.openai_agents import PlatformSession
from memory_platform_client.adapters.skill_loop import MemoryOptions, session_key
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic import Field

from apps.conversations.models import Message, Session
from apps.skills.models import SkillUse
from tests.memories.makers import semantic
from tests.skills.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=2, backoff=0.01, max_backoff=0.05)
REQUEST = "Please book a flight to Lisbon for me"
FACT = "Alice takes her flights from Porto airport OPO"


@pytest.fixture
def sdk(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        yield client


@pytest.fixture
def learned(client_a):
    semantic(client_a.organization, "default", "alice", "flights", FACT)
    return SkillFactory(organization=client_a.organization, name="book-a-flight")


# LangChain -----------------------------------------------------------------------------------------


@tool
def get_user_details(user_id: str) -> str:
    """The customer's profile."""
    return f"{user_id}: gold member"


class ScriptedModel(GenericFakeChatModel):
    prompts: list = Field(default_factory=list)

    def _generate(self, messages, *args, **kwargs):
        self.prompts.append(messages)
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools, **kwargs):
        return self


def scripted(run: int = 1) -> ScriptedModel:
    call = AIMessage("", tool_calls=[{"id": f"c{run}", "name": "get_user_details", "args": {"user_id": "alice"}}])
    return ScriptedModel(messages=iter([call, AIMessage(f"Booked flight number {run}.")]))


def agent_with(model, middleware):
    return create_agent(model, tools=[get_user_details], system_prompt="You book flights.", middleware=[middleware])


def test_langchain_agent_gets_memory_and_saves_each_message_once(sdk, client_a, learned):
    model = scripted()
    memory = MemoryMiddleware(sdk, user_id="alice", session_id="chat 42")

    result = agent_with(model, memory).invoke({"messages": [{"role": "user", "content": REQUEST}]})

    system = model.prompts[0][0]
    assert system.type == "system" and system.content.startswith("You book flights.\n\n<memory-platform-data>")
    assert FACT in system.content and "### book-a-flight" in system.content
    assert model.prompts[1][0].content == system.content  # the tool loop's second call: the same block
    session = Session.objects.get(session_id=session_key("chat 42"))
    turns = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert [role for role, _ in turns] == ["user", "assistant", "tool", "assistant"]
    assert turns[0][1] == REQUEST and turns[3][1] == "Booked flight number 1." and session.session_tag == "conversation"
    assert sdk.search("alice", "Booked flight number", memory_types=["message"])["count"] >= 1

    # The next request with the whole history passed back: only its new messages are saved.
    history = [*result["messages"], {"role": "user", "content": "And a hotel?"}]
    agent_with(ScriptedModel(messages=iter([AIMessage("No hotels, sorry.")])), memory).invoke({"messages": history})
    assert Message.objects.filter(session=session).count() == 6


def test_a_checkpointed_thread_resumed_by_a_new_middleware_saves_nothing_twice(sdk, client_a):
    checkpointer, config = InMemorySaver(), {"configurable": {"thread_id": "t1"}}
    for number in (1, 2):  # as two processes would: a new agent and middleware for each request
        middleware = MemoryMiddleware(sdk, user_id="alice", session_id="chat-7")
        agent = create_agent(
            ScriptedModel(messages=iter([AIMessage(f"Answer {number}.")])),
            tools=[get_user_details],
            middleware=[middleware],
            checkpointer=checkpointer,
        )
        result = agent.invoke({"messages": [{"role": "user", "content": f"Question {number}?"}]}, config)

    assert len(result["messages"]) == 4 and "memory_platform_saved" not in result
    assert list(Message.objects.order_by("seq").values_list("content", flat=True)) == [
        "Question 1?",
        "Answer 1.",
        "Question 2?",
        "Answer 2.",
    ]


def test_langchain_task_agent_async_closes_the_skill_loop(live_server, client_a, learned):
    model = scripted()

    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as memory:
            middleware = MemoryMiddleware(
                memory,
                user_id="alice",
                session_id="job@desk",
                task=True,
                outcome=lambda state: len(state["messages"]) == 4,
            )
            await agent_with(model, middleware).ainvoke({"messages": [{"role": "user", "content": REQUEST}]})
            await agent_with(scripted(2), middleware).ainvoke({"messages": [{"role": "user", "content": REQUEST}]})

    anyio.run(scenario)

    assert FACT in model.prompts[0][0].content and "book-a-flight" in model.prompts[0][0].content
    first = Session.objects.get(session_id=session_key("job@desk"))
    second = Session.objects.get(session_id=f"{first.session_id}--2")
    for session in (first, second):
        assert (session.session_tag, session.status, session.outcome) == ("task", "sealed", "success")
        assert Message.objects.filter(session=session).count() == 4
    # The served skill names get_user_details, which both runs called: applied in each.
    assert sorted(SkillUse.objects.filter(skill=learned).values_list("session_id", flat=True)) == sorted(
        [first.session_id, second.session_id]
    )
    assert not SkillUse.objects.filter(applied_at=None).exists()


def test_langchain_middleware_switches_and_clients(sdk, live_server, client_a, learned):
    model = scripted()
    quiet = MemoryMiddleware(
        sdk, user_id="alice", session_id="quiet", options=MemoryOptions(context=False, skills=False, save=False)
    )
    agent_with(model, quiet).invoke({"messages": [{"role": "user", "content": REQUEST}]})

    assert model.prompts[0][0].content == "You book flights." and not Session.objects.exists()
    only_async = MemoryMiddleware(AsyncMemoryClient(live_server.url, client_a.raw_key), user_id="alice", session_id="s")
    with pytest.raises(RuntimeError, match="ainvoke"):
        agent_with(scripted(), only_async).invoke({"messages": [{"role": "user", "content": REQUEST}]})
    with pytest.raises(ValueError, match="MemoryClient or an AsyncMemoryClient"):
        MemoryMiddleware(object(), user_id="alice", session_id="s")


# OpenAI Agents SDK ---------------------------------------------------------------------------------


@function_tool
def lookup_user(user_id: str) -> str:
    """The customer's profile."""
    return f"{user_id}: gold member"


class ScriptedAgentsModel(Model):
    def __init__(self):
        self.instructions, self.calls = [], 0

    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:
        self.instructions.append(system_instructions)
        self.calls += 1
        if self.calls == 1:
            output = ResponseFunctionToolCall(
                type="function_call", call_id="c1", name="lookup_user", arguments=json.dumps({"user_id": "alice"})
            )
        else:
            text = ResponseOutputText(type="output_text", text="Booked.", annotations=[])
            output = ResponseOutputMessage(
                type="message", id="m1", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


def test_agents_instructions_add_memory_and_finish_closes_the_loop(live_server, client_a, learned):
    model = ScriptedAgentsModel()

    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as memory:
            session = PlatformSession(
                "booking for alice@example.com", user_id="alice", client=memory, session_tag="task", outcome="failure"
            )
            agent = Agent(
                name="booker",
                instructions=session.instructions(lambda context, agent: f"You are {agent.name}."),
                model=model,
                tools=[lookup_user],
            )
            result = await Runner.run(agent, REQUEST, session=session, run_config=RunConfig(tracing_disabled=True))
            return result.final_output, await session.finish(result), session

    answer, sealed, session = anyio.run(scenario)

    first = model.instructions[0]
    assert answer == "Booked." and first.startswith("You are booker.\n\n<memory-platform-data>")
    assert FACT in first and "### book-a-flight" in first and model.instructions[1] == first
    stored = Session.objects.get(session_id=session_key("booking for alice@example.com"))
    assert (stored.session_tag, stored.status, stored.outcome) == ("task", "sealed", "failure")
    assert (
        sealed["session"]["session_id"] == stored.session_id and session.session_id == "booking for alice@example.com"
    )
    assert list(Message.objects.filter(session=stored).order_by("seq").values_list("role", flat=True)) == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    # The skill was served to this task session; the run called no tool it names, so it is not applied.
    use = SkillUse.objects.get(skill=learned)
    assert use.session_id == stored.session_id and use.applied_at is None


def test_another_organisations_middleware_sees_and_touches_nothing_of_ours(sdk, live_server, foreign_client, learned):
    model = scripted()
    with MemoryClient(live_server.url, foreign_client.raw_key, timeout=10, retries=FAST) as theirs:
        middleware = MemoryMiddleware(theirs, user_id="alice", session_id="chat 42", task=True, outcome="success")
        agent_with(model, middleware).invoke({"messages": [{"role": "user", "content": REQUEST}]})

    assert model.prompts[0][0].content == "You book flights."  # no fact, no skill of another organisation
    assert not SkillUse.objects.exists()
    (session,) = Session.objects.all()
    assert session.organization == foreign_client.organization and session.outcome == "success"
    assert sdk.search("alice", "Booked flight number", memory_types=["message"])["count"] == 0
