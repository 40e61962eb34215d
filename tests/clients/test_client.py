"""The Python SDK (clients/python) against the live platform: every method, every error type,
paging, OpenAI message objects, retries through a misbehaving proxy, and idempotent replay."""

import subprocess
import sys
import time
import uuid

import anyio
import pytest
from memory_platform_client import (
    AsyncMemoryClient,
    AuthenticationError,
    ConflictError,
    MemoryClient,
    NotFoundError,
    PermissionDeniedError,
    Retries,
    ServerError,
    TaskTimeoutError,
    ValidationError,
)
from memory_platform_client import client as client_module
from openai.types.chat import ChatCompletionMessage

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.skills.models import Skill
from tests.clients.proxy import FaultyProxy
from tests.factories import ClientFactory
from tests.memories.makers import episodic, semantic
from tests.profiles.makers import make_profile
from tests.skills.factories import ExperienceFactory, SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=3, backoff=0.01, max_backoff=0.05)
TOOL_TURNS = [
    {"role": "user", "content": "What's the weather in Lisbon?"},
    ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        }
    ),
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21°C and sunny"},
    ChatCompletionMessage.model_validate({"role": "assistant", "content": "It is 21°C and sunny in Lisbon."}),
]


@pytest.fixture
def sdk(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        yield client


@pytest.fixture
def proxy(live_server):
    proxy = FaultyProxy(live_server.url).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def via_proxy(proxy, client_a):
    with MemoryClient(proxy.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        yield client


def test_add_takes_openai_sdk_message_objects_and_search_finds_them(sdk, client_a):
    added = sdk.add("alice", "chat-1", TOOL_TURNS, occurred_at="2025-01-02T10:00:00Z")

    assert (added["messages_stored"], added["first_seq"], added["last_seq"]) == (4, 1, 4)
    stored = list(Message.objects.filter(session__session_id="chat-1").order_by("seq"))
    assert stored[1].tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}
    assert (stored[2].role, stored[2].name, stored[2].tool_call_id) == ("tool", "get_weather", "call_1")
    assert sdk.me()["write_scope"] == "default"

    found = sdk.search("alice", "sunny Lisbon", memory_types=["message"], limit=2)
    assert found["count"] == 2 and {hit["seq"] for hit in found["results"]} <= {2, 3, 4}
    everyone = sdk.search_all_users("sunny", memory_types=["message"])
    assert {hit["user_id"] for hit in everyone["results"]} == {"alice"}


def test_search_takes_a_time_window(sdk):
    question = "Where did I go hiking in May 2023?"

    window = sdk.search("alice", question, time_window="boost")["time_window"]
    everyone = sdk.search_all_users(question, time_window="off")

    assert (window["start"], window["end"], window["mode"]) == ("2023-05-01", "2023-05-31", "boost")
    assert everyone["time_window"] is None


def test_sessions(sdk, client_a, monkeypatch):
    for number in range(5):
        sdk.add("alice", f"chat-{number}", [{"role": "user", "content": f"turn {number}"}])
    sdk.add("alice", "job-1", TOOL_TURNS, session_tag="task")

    assert [s["session_id"] for s in sdk.sessions.iter(user_id="alice", session_tag="conversation", page_size=2)] == [
        f"chat-{number}" for number in (4, 3, 2, 1, 0)
    ]
    assert len(sdk.sessions.list(user_id="alice")) == 6
    page = sdk.sessions.page(limit=1, offset=1, user_id="alice")
    assert page["count"] == 6 and [s["session_id"] for s in page["results"]] == ["chat-4"]

    part = sdk.sessions.get("job-1", "alice", limit=2, offset=1)
    assert [m["seq"] for m in part["messages"]] == [2, 3] and part["messages_next_offset"] == 3
    monkeypatch.setattr(client_module, "TRANSCRIPT_PAGE_SIZE", 3)  # the whole transcript, in pages of 3
    whole = sdk.sessions.get("job-1", "alice")
    assert [m["seq"] for m in whole["messages"]] == [1, 2, 3, 4] and whole["messages_next_offset"] is None

    assert sdk.sessions.set_outcome("job-1", "alice", "success")["outcome"] == "success"
    sealed = sdk.sessions.seal("job-1", "alice")
    assert sealed["session"]["status"] == "sealed" and sealed["task_ids"]
    distill = sdk.sessions.distill("job-1", "alice")
    assert distill["session_id"] == "job-1" and sdk.task(distill["task_id"])["task_type"] == "distill_session"


def test_skills_experiences_and_retrieval(sdk, client_a):
    skills = [SkillFactory(organization=client_a.organization, name=f"book-flight-{n}") for n in range(3)]
    ExperienceFactory(organization=client_a.organization, title="Check the profile first")

    assert {s["id"] for s in sdk.skills.iter(page_size=2)} == {str(skill.pk) for skill in skills}
    assert sdk.skills.get(str(skills[0].pk))["name"] == "book-flight-0"
    assert [e["title"] for e in sdk.experiences.list()] == ["Check the profile first"]
    retrieved = sdk.retrieve_skills("book a flight for a customer", k=2)
    assert len(retrieved["skills"]) == 2 and retrieved["skills"][0]["score"] > 0

    assert sdk.skills.delete(str(skills[0].pk)) is None
    with pytest.raises(NotFoundError):
        sdk.skills.get(str(skills[0].pk))


def test_profiles_and_entities(sdk, client_a):
    profile = make_profile(client_a, "alice", "Alice paints and lives in Lisbon.")

    assert [p["id"] for p in sdk.profiles.list(user_id="alice")] == [str(profile.pk)]
    assert sdk.profiles.get(str(profile.pk))["name"] == profile.name
    assert [e["name"] for e in sdk.entities.iter(user_id="alice")] == [profile.name]
    assert sdk.profiles.list(user_id="bob") == []


def test_delete_memory_of_every_type(sdk, client_a):
    sdk.add("alice", "chat-1", [{"role": "user", "content": "hello"}])
    message = Message.objects.get()
    fact = semantic(client_a.organization, "default", "alice", "sister", "lives in Lisbon")
    event = episodic(client_a.organization, "default", "alice", "Flew to Lisbon")
    skill = SkillFactory(organization=client_a.organization)

    for memory_type, item in [("message", message), ("semantic", fact), ("episodic", event), ("procedural", skill)]:
        assert sdk.delete_memory(memory_type, str(item.pk)) is None

    assert not any(model.objects.exists() for model in (Message, SemanticMemory, EpisodicMemory, Skill))
    with pytest.raises(ValueError):
        sdk.delete_memory("experience", str(uuid.uuid4()))


def test_erasure_tasks_and_waiting(sdk, client_a):
    client_a.can_erase = True
    client_a.save(update_fields=["can_erase"])
    sdk.add("alice", "chat-1", [{"role": "user", "content": "hello"}])
    other = ClientFactory(organization=client_a.organization)

    accepted = sdk.erase_user("alice")
    assert sdk.erasure(accepted["erasure_id"])["status"] == "queued"
    with pytest.raises(TaskTimeoutError) as timed_out:
        sdk.wait_for_task(accepted["task_id"], timeout=0.3, poll_interval=0.1)
    assert timed_out.value.task["status"] == "queued"

    task_execute(task_id=accepted["task_id"], worker="test")
    assert sdk.wait_for_task(accepted["task_id"], timeout=10)["status"] == "succeeded"
    assert sdk.erasure(accepted["erasure_id"])["status"] == "succeeded"
    assert not Message.objects.exists()

    client_erasure = sdk.erase_client(str(other.pk))
    assert ErasureRequest.objects.get(pk=client_erasure["erasure_id"]).subject_id == str(other.pk)


def test_every_error_type_carries_the_platform_error(live_server, sdk, client_a):
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    # Closed at once: an open keep-alive connection would hold a live server thread and its database session.
    with MemoryClient(live_server.url, "mp_abcdefgh_wrong") as stranger, pytest.raises(AuthenticationError) as auth:
        stranger.me()
    with MemoryClient(live_server.url, reader.raw_key) as read_only, pytest.raises(PermissionDeniedError) as denied:
        read_only.add("alice", "chat-1", [{"role": "user", "content": "hi"}])
    with pytest.raises(PermissionDeniedError) as no_erase:
        sdk.erase_user("alice")
    with pytest.raises(NotFoundError) as missing:
        sdk.sessions.get("nope", "alice")
    sdk.add("alice", "chat-1", [{"role": "user", "content": "hi"}], seal=True)
    with pytest.raises(ConflictError) as conflict:
        sdk.add("alice", "chat-1", [{"role": "user", "content": "again"}])
    with pytest.raises(ValidationError) as invalid:
        sdk.add("alice", "not valid!", [{"role": "robot", "content": "hi"}])

    assert (auth.value.status, auth.value.code, auth.value.message) == (
        401,
        "authentication_failed",
        "Invalid or revoked API key.",
    )
    assert (denied.value.status, denied.value.message) == (403, "This client is read-only (it has no write scope).")
    assert no_erase.value.message == "This client may not erase: erasure needs the client's can_erase permission."
    assert missing.value.body == {"error": {"status": 404, "code": "not_found", "message": "Not found."}}
    assert (conflict.value.status, conflict.value.code) == (409, "conflict")
    assert invalid.value.status == 400 and invalid.value.code == "invalid"
    assert set(invalid.value.details) == {"session_id"}
    assert "session_id: Use 1-64 letters" in invalid.value.message


def test_idempotent_replay(sdk, client_a):
    turns = [{"role": "user", "content": "only once"}]

    first = sdk.add("alice", "chat-1", turns, idempotency_key="batch-1")
    again = sdk.add("alice", "chat-1", turns, idempotency_key="batch-1")

    assert again == first and Message.objects.count() == 1
    with pytest.raises(ConflictError):
        sdk.add("alice", "chat-1", [{"role": "user", "content": "something else"}], idempotency_key="batch-1")


def test_a_503_from_the_proxy_is_retried(proxy, via_proxy):
    proxy.plan = ["503", "503"]

    assert via_proxy.search("alice", "anything")["count"] == 0
    assert [method for method, _path, _key in proxy.seen] == ["POST"] * 3


def test_an_add_whose_answer_was_lost_is_stored_once(proxy, via_proxy, client_a):
    proxy.plan = ["forward-then-503"]

    added = via_proxy.add("alice", "chat-1", [{"role": "user", "content": "stored once"}])

    assert added["messages_stored"] == 1 and Message.objects.count() == 1
    keys = [key for _method, _path, key in proxy.seen]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("sdk-")


def test_a_dropped_connection_is_retried(proxy, via_proxy):
    proxy.plan = ["drop"]

    assert via_proxy.me()["name"] == "agent-a"
    assert len(proxy.seen) == 2


def test_a_429_waits_for_retry_after(proxy, via_proxy):
    proxy.plan = ["429"]

    started = time.monotonic()
    assert via_proxy.me()["name"] == "agent-a"
    assert time.monotonic() - started >= 1.0 and len(proxy.seen) == 2


def test_client_errors_are_not_retried_and_retries_end(proxy, via_proxy):
    with pytest.raises(ValidationError):
        via_proxy.add("alice", "not valid!", [{"role": "user", "content": "hi"}])
    assert len(proxy.seen) == 1

    proxy.plan = ["503"] * 5
    with pytest.raises(ServerError) as exhausted:
        via_proxy.me()
    assert (exhausted.value.status, exhausted.value.body) == (503, None)
    assert len(proxy.seen) == 1 + 4  # the first try and three retries


def test_async_client(live_server, client_a):
    skill = SkillFactory(organization=client_a.organization, name="book-flight")
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])

    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, retries=FAST) as memory:
            added = await memory.add("alice", "job-1", TOOL_TURNS, session_tag="task", seal=True, outcome="success")
            return {
                "added": added,
                "me": await memory.me(),
                "search": await memory.search("alice", "Lisbon", memory_types=["message"]),
                "everyone": await memory.search_all_users("Lisbon", memory_types=["message"]),
                "skills": await memory.retrieve_skills("book a flight for a customer"),
                "sessions": [s async for s in memory.sessions.iter(page_size=1)],
                "session_list": await memory.sessions.list(),
                "session": await memory.sessions.get("job-1", "alice"),
                "outcome": await memory.sessions.set_outcome("job-1", "alice", "failure"),
                "skill": await memory.skills.get(str(skill.pk)),
                "skill_list": await memory.skills.list(),
                "experiences": await memory.experiences.list(),
                "task": await memory.task(added["task_ids"][0]),
            }

    async def wait(task_id, timeout):
        async with AsyncMemoryClient(live_server.url, client_a.raw_key) as memory:
            return await memory.wait_for_task(task_id, timeout=timeout, poll_interval=0.05)

    async def erase_as_reader():
        async with AsyncMemoryClient(live_server.url, reader.raw_key) as memory:
            await memory.erase_user("alice")

    results = anyio.run(scenario)
    task_id = results["added"]["task_ids"][0]
    with pytest.raises(TaskTimeoutError):
        anyio.run(wait, task_id, 0.2)
    task_execute(task_id=task_id, worker="test")
    finished = anyio.run(wait, task_id, 10)
    with pytest.raises(PermissionDeniedError):
        anyio.run(erase_as_reader)

    assert results["added"]["messages_stored"] == 4 and results["me"]["name"] == "agent-a"
    assert results["search"]["count"] >= 1 and results["everyone"]["count"] >= 1
    assert results["skills"]["skills"][0]["id"] == str(skill.pk)
    assert (
        [s["session_id"] for s in results["sessions"]]
        == ["job-1"]
        == [s["session_id"] for s in results["session_list"]]
    )
    assert len(results["session"]["messages"]) == 4 and results["outcome"]["outcome"] == "failure"
    assert results["skill"]["name"] == "book-flight" and len(results["skill_list"]) == 1
    assert results["experiences"] == [] and results["task"]["status"] == "queued"
    assert finished["status"] == "succeeded"


def test_the_sdk_imports_without_django():
    """`pip install ./clients/python` needs no Django: the package and its MCP server import without it,
    and its adapters package and shared skill loop without any framework (each adapter's framework is an extra)."""
    code = (
        "import sys; sys.modules['django'] = None; sys.modules['rest_framework'] = None\n"
        "for name in ('langgraph', 'agents', 'langchain_core', 'langchain'): sys.modules[name] = None\n"
        "import memory_platform_client, memory_platform_client.mcp_server.stdio, memory_platform_client.adapters\n"
        "import memory_platform_client.adapters.skill_loop\n"
        "from importlib.metadata import requires\n"
        "print(sorted(r.split(';')[0].split('>')[0].split('<')[0] for r in requires('memory-platform-client')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == "['anyio', 'httpx2', 'langchain', 'langchain-core', 'langgraph', 'mcp', 'openai-agents', 'pydantic']"
    )


def test_the_agent_api(sdk, client_a):
    """context, memories (create, page, iterate, get, update, history, delete), the deletes of a
    session, an experience, a profile and an entity, and a page's findings."""
    sdk.add("alice", "chat-1", [{"role": "user", "content": "My sister Ana lives in Lisbon."}])
    fact = sdk.memories.create("semantic", "alice", name="Ana", summary="Ana lives in Lisbon.", reason="stated")
    for day in range(1, 4):
        sdk.memories.create(
            "episodic",
            "alice",
            summary=f"Alice called Ana, call {day}.",
            occurred_at=f"2023-05-0{day}T10:00:00Z",
            actor="Alice",
        )
    context = sdk.context("alice", [{"role": "user", "content": "Where does Ana live?"}], max_tokens=200)
    assert context["tokens"] <= 200 and any(item["id"] == fact["id"] for item in context["items"])

    assert sdk.memories.page("episodic", "alice", limit=2)["count"] == 3
    assert len(list(sdk.memories.iter("episodic", "alice", page_size=2))) == 3
    assert [m["summary"] for m in sdk.memories.list("episodic", "alice", end="2023-05-01T23:00:00Z")] == [
        "Alice called Ana, call 1."
    ]
    assert sdk.memories.get("semantic", fact["id"])["name"] == "Ana"
    assert (
        sdk.memories.update("semantic", fact["id"], summary="Ana lives in Porto.")["summary"] == "Ana lives in Porto."
    )
    assert [c["operation"] for c in sdk.memories.history("semantic", fact["id"])["changes"]] == ["add", "update"]
    sdk.memories.delete("semantic", fact["id"])
    with pytest.raises(NotFoundError):
        sdk.memories.get("semantic", fact["id"])
    with pytest.raises(ValueError):
        sdk.memories.get("procedural", fact["id"])

    profile = make_profile(client_a, "alice", "Ana lives in Lisbon and paints.")
    assert sdk.profiles.findings(str(profile.pk))["findings"] == []
    sdk.profiles.delete(str(profile.pk))
    sdk.entities.delete(str(profile.entity_id))
    experience = ExperienceFactory(organization=client_a.organization)
    sdk.experiences.delete(str(experience.pk))
    deletion = sdk.sessions.delete("chat-1", "alice")
    task_execute(task_id=deletion["task_id"], worker="test")
    assert sdk.wait_for_task(deletion["task_id"], timeout=5, poll_interval=0.05)["status"] == "succeeded"
    with pytest.raises(NotFoundError):
        sdk.sessions.get("chat-1", "alice")


def test_the_async_agent_api(live_server, client_a):
    async def scenario():
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, retries=FAST) as memory:
            created = await memory.memories.create("semantic", "alice", name="Ana", summary="Ana lives in Lisbon.")
            return {
                "context": await memory.context("alice", query="Ana", max_tokens=100),
                "memories": [m async for m in memory.memories.iter("semantic", "alice", page_size=1)],
                "updated": await memory.memories.update("semantic", created["id"], name="Ana Silva"),
            }

    results = anyio.run(scenario)
    assert results["context"]["items"][0]["memory_type"] == "semantic"
    assert [m["name"] for m in results["memories"]] == ["Ana"] and results["updated"]["name"] == "Ana Silva"
