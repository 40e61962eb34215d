"""One scripted agent session — add, search, context, retrieve skills, apply, feedback, erase — through
every way in: REST, the Python SDK (blocking and async), the TypeScript SDK, MCP over HTTP with an API
key or an OAuth token and MCP over stdio, each in an organisation of its own. What each step answers,
reduced to what an agent acts on, is the same on every transport (docs/api.md "One session, every
transport"). The framework adapters express the steps their interfaces have (adding turns); what they
add is then found the same way."""

import json
import os
import subprocess
import uuid
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from django.utils import timezone
from memory_platform_client import AsyncMemoryClient, MemoryClient, contract
from memory_platform_client.adapters.langchain_history import PlatformChatMessageHistory
from memory_platform_client.adapters.openai_agents import PlatformSession

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from tests.admin.makers import staff_user
from tests.clients.test_typescript import node  # noqa: F401  (fixture: npm ci and tsc, once)
from tests.factories import ClientFactory
from tests.mcp_server.conftest import mcp_server  # noqa: F401  (fixture)
from tests.mcp_server.mcp_client import http_transport, run, stdio_transport
from tests.mcp_server.test_oauth import issuer, oauth_mcp, tokens_by_hand  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CHAT = [{"role": "user", "content": "My sister lives in Lisbon and works as a marine biologist."}]
TASK = [
    {"role": "user", "content": "Move my flight ABC123 to Friday"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_reservation", "arguments": '{"id": "ABC123"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"flight": "HAT001", "date": "2025-05-14"}'},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "update_reservation", "arguments": '{"id": "ABC123", "date": "2025-05-16"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    {"role": "assistant", "content": "Done: your flight is now on Friday."},
]
QUERY = "where does my sister live"
TYPESCRIPT_PACKAGE = Path(__file__).resolve().parent.parent / "clients" / "typescript"


def run_queued_tasks() -> None:
    """What a worker would do between the agent's steps: every queued task, until none is left."""
    while pending := list(MemoryTask.objects.filter(status__in=MemoryTask.CLAIMABLE_STATUSES).order_by("created_at")):
        MemoryTask.objects.filter(pk__in=[task.pk for task in pending]).update(run_after=timezone.now())
        for task in pending:
            task_execute(task_id=task.pk, worker="test")


# Transports: each is `call(tool_name, **arguments) -> the answer as JSON`, built from the tool table.


def rest(base_url: str, key: str):
    def call(name: str, **arguments):
        tool = contract.TOOLS_BY_NAME[name]
        path, query, body, headers = tool.path, {}, {}, {"Authorization": f"Api-Key {key}"}
        for arg in tool.args:
            if arg.name not in arguments:
                continue
            value = arguments[arg.name]
            if arg.where == "path":
                path = path.replace(f"{{{arg.name}}}", str(value))
            elif arg.where == "query":
                query[arg.name] = value
            elif arg.where == "header":
                headers[arg.name] = value
            else:
                body[arg.name] = value
        response = httpx.request(
            tool.method, f"{base_url}/api/v1/{path}", params=query, json=body or None, headers=headers, timeout=30
        )
        assert response.status_code == tool.status, (name, response.status_code, response.text)
        return response.json() if response.content else None

    return call


def sdk(base_url: str, key: str):
    def call(name: str, **arguments):
        # A client per call, closed: a kept-alive connection would hold a live-server thread open.
        with MemoryClient(base_url, key, timeout=30) as client:
            return contract.sdk_method(client, contract.TOOLS_BY_NAME[name])(**arguments)

    return call


def async_sdk(base_url: str, key: str):
    def call(name: str, **arguments):
        async def main():
            async with AsyncMemoryClient(base_url, key, timeout=30) as client:
                return await contract.sdk_method(client, contract.TOOLS_BY_NAME[name])(**arguments)

        return anyio.run(main)

    return call


# One call of the TypeScript SDK's built client: path arguments positional (as the tool table orders
# them), the other arguments as one object, the Idempotency-Key as an option.
NODE_CALL = """
import { MemoryClient } from "./dist/src/index.js";
const [method, args] = JSON.parse(process.env.MP_CALL);
let target = new MemoryClient(process.env.MP_URL, process.env.MP_KEY, { timeoutMs: 30000 });
const path = method.split(".");
for (const name of path.slice(0, -1)) target = target[name];
const answer = await target[path.at(-1)](...args);
process.stdout.write(JSON.stringify(answer ?? null));
"""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def typescript(base_url: str, key: str):
    def call(name: str, **arguments):
        tool = contract.TOOLS_BY_NAME[name]
        positional = [arguments[arg.name] for arg in tool.args if arg.where == "path"]
        params = {
            arg.name: arguments[arg.name]
            for arg in tool.args
            if arg.where in ("body", "query") and arg.name in arguments
        }
        args = [*positional, params] if params else positional
        method = ".".join(camel(part) for part in tool.sdk.split("."))
        completed = subprocess.run(
            ["node", "--input-type=module", "-e", NODE_CALL],
            cwd=TYPESCRIPT_PACKAGE,
            env={**os.environ, "MP_URL": base_url, "MP_KEY": key, "MP_CALL": json.dumps([method, args])},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 0, (name, completed.stderr)
        return json.loads(completed.stdout)

    return call


def mcp(connect):
    def call(name: str, **arguments):
        async def scenario(session):
            return await session.call_tool(name, arguments)

        result = run(connect, scenario)
        assert not result.is_error, (name, result.content)
        return result.structured_content

    return call


def script(call, *, skill_task_session: str) -> dict:
    """The session every transport plays; returns each step's answer reduced to what an agent acts on."""
    seen = {}
    added = call("add_memory", user_id="alice", session_id="chat-1", messages=CHAT)
    seen["add"] = (added["messages_stored"], added["status"], len(added["task_ids"]) > 0)
    call(
        "add_memory",
        user_id="alice",
        session_id="job-1",
        session_tag="task",
        seal=True,
        outcome="success",
        messages=TASK,
    )
    run_queued_tasks()

    hits = call("search_memory", user_id="alice", query=QUERY, memory_types=["message"], limit=1)["results"]
    seen["search"] = [(hit["memory_type"], hit["content"]) for hit in hits]
    context = call("get_context", user_id="alice", query=QUERY)
    seen["context"] = CHAT[0]["content"] in json.dumps(context)

    call("add_memory", user_id="alice", session_id=skill_task_session, session_tag="task", messages=TASK[:1])
    skills = call("retrieve_skills", task="change a flight reservation", user_id="alice", session_id=skill_task_session)
    seen["skills"] = [(skill["name"], skill["instructions"]) for skill in skills["skills"]]
    skill_id = skills["skills"][0]["id"]
    applied = call("apply_skill", skill_id=skill_id, user_id="alice", session_id=skill_task_session)
    seen["apply"] = sorted(key for key in applied if key not in {"id", "created_at", "skill_id", "used_at"})
    feedback = call(
        "skill_feedback",
        skill_id=skill_id,
        user_id="alice",
        session_id=skill_task_session,
        verdict="helped",
        reason="ok",
    )
    seen["feedback"] = (feedback["verdict"], feedback["reason"])

    erased = call("erase_user", user_id="alice")
    seen["erase"] = erased["status"]
    run_queued_tasks()
    seen["after_erase"] = call("search_memory", user_id="alice", query=QUERY)["count"]
    return seen


def test_one_session_answers_the_same_on_every_transport(live_server, mcp_server, node, oauth_mcp, issuer):  # noqa: F811
    clients = {}

    def key_of_new_organisation() -> str:
        client = ClientFactory(write_scope="agents", can_erase=True)
        clients[client.raw_key] = client
        return client.raw_key

    def oauth(key: str):
        """The host registers, a staff member of the organisation approves it for the key's client, and
        the host exchanges the code with PKCE: the token stands in for the key."""
        client = clients[key]
        token = tokens_by_hand(issuer, oauth_mcp.url, staff_user(client.organization), client)["access_token"]
        return mcp(http_transport(oauth_mcp.url, {"Authorization": f"Bearer {token}"}))

    transports = {
        "REST": lambda key: rest(live_server.url, key),
        "Python SDK": lambda key: sdk(live_server.url, key),
        "Python SDK (async)": lambda key: async_sdk(live_server.url, key),
        "MCP, HTTP, API key": lambda key: mcp(http_transport(mcp_server.url, {"Authorization": f"Api-Key {key}"})),
        "MCP, HTTP, OAuth": oauth,
        "MCP, stdio": lambda key: mcp(stdio_transport(live_server.url, key)),
        "TypeScript SDK": lambda key: typescript(live_server.url, key),
    }
    answers = {
        name: script(make(key_of_new_organisation()), skill_task_session=f"job-{uuid.uuid4().hex[:8]}")
        for name, make in transports.items()
    }

    expected = answers["REST"]
    assert expected["add"] == (1, "open", True)
    assert expected["search"] == [("message", CHAT[0]["content"])]
    assert expected["context"] is True
    assert [name for name, _ in expected["skills"]] == ["get-reservation-update-reservation"]
    assert expected["feedback"] == ("helped", "ok")
    assert expected["after_erase"] == 0
    for name, seen in answers.items():
        assert seen == expected, name


def test_what_the_adapters_add_is_found_as_rest_adds_it(live_server):
    """The Agents SDK session and the LangChain history store turns: a search finds them as it finds
    the turns added over REST (the framework interfaces cannot express skills, outcomes or erasure)."""

    def found(key: str) -> list:
        hits = rest(live_server.url, key)(
            "search_memory", user_id="alice", query=QUERY, memory_types=["message"], limit=1
        )
        return [(hit["memory_type"], hit["content"], hit["role"]) for hit in hits["results"]]

    by_rest = ClientFactory(write_scope="agents").raw_key
    rest(live_server.url, by_rest)("add_memory", user_id="alice", session_id="chat-1", messages=CHAT)

    by_agents = ClientFactory(write_scope="agents").raw_key

    async def agents():
        async with AsyncMemoryClient(live_server.url, by_agents, timeout=30) as client:
            await PlatformSession("chat-1", user_id="alice", client=client).add_items(CHAT)

    anyio.run(agents)

    by_langchain = ClientFactory(write_scope="agents").raw_key
    from langchain_core.messages import HumanMessage

    with MemoryClient(live_server.url, by_langchain, timeout=30) as client:
        PlatformChatMessageHistory("chat-1", user_id="alice", client=client).add_messages(
            [HumanMessage(CHAT[0]["content"])]
        )
    run_queued_tasks()
    assert found(by_rest) == [("message", CHAT[0]["content"], "user")]
    assert found(by_agents) == found(by_rest)
    assert found(by_langchain) == found(by_rest)
