"""Every MCP tool through both transports, with the official SDK's ClientSession: streamable HTTP
against `manage.py runmcp`, and stdio against `memory-platform-mcp` talking to a live server."""

import pytest

from apps.conversations.models import Message
from apps.memories.models import SemanticMemory
from apps.privacy.models import ErasureRequest
from apps.skills.models import Skill, SkillFeedback, SkillUse
from tests.factories import ClientFactory
from tests.mcp_server.mcp_client import call, http_transport, run, stdio_transport, text
from tests.mcp_server.oauth import minted_token
from tests.memories.makers import semantic
from tests.profiles.makers import make_profile, make_topic
from tests.skills.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "add_memory",
    "search_memory",
    "retrieve_skills",
    "list_sessions",
    "get_session",
    "delete_memory",
    "erase_user",
    "get_context",
    "list_memories",
    "get_memory",
    "update_memory",
    "memory_history",
    "get_profile",
    "list_entities",
    "delete_session",
    "consolidate_memories",
    "apply_skill",
    "skill_feedback",
}
READ_TOOLS = {
    "search_memory",
    "retrieve_skills",
    "list_sessions",
    "get_session",
    "get_context",
    "list_memories",
    "get_memory",
    "memory_history",
    "get_profile",
    "list_entities",
}
DESTRUCTIVE_TOOLS = {"delete_memory", "erase_user", "delete_session", "consolidate_memories"}
READ_ONLY = "Refused (403 permission_denied): This client is read-only (it has no write scope)."
NO_ERASE = (
    "Refused (403 permission_denied): This client may not erase: erasure needs the client's can_erase permission."
)
NOT_FOUND = "Not found (404 not_found): Not found."

CONVERSATION = [
    {"role": "user", "content": "What's the weather in Lisbon? My sister lives there."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21°C and sunny"},
]


@pytest.fixture(params=["http", "stdio", "oauth"])
def connect_as(request):
    """connect_as(client) opens an MCP session as the client over one transport: with its API key over
    HTTP and stdio, or over HTTP with an OAuth access token of an application bound to it."""
    if request.param == "http":
        url = request.getfixturevalue("mcp_server").url
        return lambda client: http_transport(url, {"Authorization": f"Api-Key {client.raw_key}"})
    if request.param == "oauth":
        url = request.getfixturevalue("mcp_server").url
        return lambda client: http_transport(url, {"Authorization": f"Bearer {minted_token(client)}"})
    live_server = request.getfixturevalue("live_server")
    return lambda client: stdio_transport(live_server.url, client.raw_key)


def test_lists_every_tool_with_its_annotations_and_schemas(connect_as, client_a):
    async def scenario(session):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(connect_as(client_a), scenario)}

    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.annotations.read_only_hint is (name in READ_TOOLS), name
        assert bool(tool.annotations.destructive_hint) is (name in DESTRUCTIVE_TOOLS), name
        assert tool.description and tool.input_schema["type"] == "object"
    add = tools["add_memory"].input_schema
    assert add["required"] == ["user_id", "session_id", "messages"]
    assert add["properties"]["session_tag"]["anyOf"][0]["enum"] == ["conversation", "task"]
    assert tools["delete_memory"].input_schema["properties"]["memory_type"]["enum"] == [
        "message",
        "episodic",
        "semantic",
        "procedural",
    ]
    assert tools["search_memory"].input_schema["required"] == ["user_id"]  # an empty query lists the latest


def test_both_transports_publish_the_same_tools(mcp_server, live_server, client_a):
    async def scenario(session):
        return [tool.model_dump() for tool in (await session.list_tools()).tools]

    over_http = run(http_transport(mcp_server.url, {"Authorization": f"Api-Key {client_a.raw_key}"}), scenario)
    over_stdio = run(stdio_transport(live_server.url, client_a.raw_key), scenario)

    assert over_http == over_stdio


def test_every_tool(connect_as, client_a):
    client_a.can_erase = True
    client_a.save(update_fields=["can_erase"])
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")
    skill = SkillFactory(organization=client_a.organization, name="book-flight")
    profile = make_profile(client_a, "alice", "Alice's sister Ana lives in Lisbon and paints.")

    async def scenario(session):
        results = {
            "add": await session.call_tool(
                "add_memory",
                {
                    "user_id": "alice",
                    "session_id": "chat-1",
                    "messages": CONVERSATION,
                },
            )
        }
        results["search"] = await session.call_tool("search_memory", {"user_id": "alice", "query": "Lisbon sister"})
        results["skills"] = await session.call_tool("retrieve_skills", {"task": "book a flight for a customer", "k": 3})
        results["sessions"] = await session.call_tool("list_sessions", {"user_id": "alice"})
        results["session"] = await session.call_tool("get_session", {"user_id": "alice", "session_id": "chat-1"})
        message_id = results["session"].structured_content["messages"][0]["id"]
        results["delete_semantic"] = await session.call_tool(
            "delete_memory", {"memory_type": "semantic", "memory_id": str(sister.pk)}
        )
        results["delete_message"] = await session.call_tool(
            "delete_memory", {"memory_type": "message", "memory_id": message_id}
        )
        results["erase"] = await session.call_tool("erase_user", {"user_id": "alice"})
        return results

    results = run(connect_as(client_a), scenario)

    assert not any(result.is_error for result in results.values()), {k: text(r) for k, r in results.items()}
    add = results["add"]
    assert add.structured_content["messages_stored"] == 3
    assert text(add).startswith("Stored 3 turn(s) in session chat-1 of user alice (conversation, open), turns #1–#3")

    hits = results["search"].structured_content["results"]
    assert results["search"].structured_content["decomposed_into"] is None  # QUERY_DECOMPOSER is none by default
    assert {hit["memory_type"] for hit in hits} >= {"semantic", "message"}
    assert f"[semantic] id={sister.pk}" in text(results["search"])
    assert "sister: Alice's sister lives in Lisbon" in text(results["search"])
    assert f"[profile] id={profile.pk}" in text(results["search"])
    assert f"profile of {profile.name} (revision 1): Alice's sister Ana lives in Lisbon and paints." in text(
        results["search"]
    )

    skills = results["skills"].structured_content["skills"]
    assert skills[0]["id"] == str(skill.pk)
    assert "book-flight (workflow, v1, score" in text(results["skills"])
    assert "Instructions: Steps: 1. get_user_details(user_id)" in text(results["skills"])

    assert results["sessions"].structured_content["count"] == 1
    assert results["sessions"].structured_content["next_offset"] is None
    assert "- chat-1 · user alice · conversation · open · outcome unknown · 3 turn(s)" in text(results["sessions"])

    transcript = text(results["session"])
    assert transcript.startswith("Session chat-1 of user alice (conversation, open, outcome unknown), 3 turn(s)")
    assert "assistant [calls get_weather]" in transcript
    assert "tool get_weather: [get_weather] 21°C and sunny" in transcript

    assert text(results["delete_semantic"]) == f"Deleted semantic {sister.pk}."
    assert not SemanticMemory.objects.filter(pk=sister.pk).exists()
    assert Message.objects.filter(session__session_id="chat-1").count() == 2

    erasure = ErasureRequest.objects.get(pk=results["erase"].structured_content["erasure_id"])
    assert (erasure.subject_kind, erasure.subject_id, erasure.requested_by_id) == ("user", "alice", client_a.pk)
    assert text(results["erase"]).startswith(f"Erasure of user alice accepted: erasure {erasure.pk}, status queued.")


def test_invalid_arguments_get_the_rest_api_message(connect_as, client_a):
    result = call(
        connect_as(client_a),
        "add_memory",
        {
            "user_id": "alice",
            "session_id": "no spaces allowed",
            "messages": [{"role": "user", "content": "hi"}],
        },
    )

    assert result.is_error
    assert "Failed (400 invalid): Invalid input: session_id: Use 1-64 letters, digits, '_' or '-'." in text(result)


@pytest.mark.parametrize(
    "tool,arguments,field",
    [
        ("get_session", {"session_id": "a\x00b", "user_id": "alice"}, "session_id"),
        ("get_session", {"session_id": "chat-1", "user_id": "al\x00ice"}, "user_id"),
        ("list_sessions", {"user_id": "\x00"}, "user_id"),
        ("search_memory", {"user_id": "alice", "query": "a\x00"}, "query"),
        (
            "add_memory",
            {"user_id": "alice", "session_id": "chat-1", "messages": [{"role": "user", "content": "\x00"}]},
            "messages.0.content",
        ),
        ("erase_user", {"user_id": "a\x00b"}, "user_id"),
        ("delete_memory", {"memory_type": "message", "memory_id": "a\x00b"}, "item_id"),
        ("get_context", {"user_id": "al\x00ice"}, "user_id"),
        ("get_context", {"user_id": "alice", "query": "a\x00"}, "query"),
        ("list_memories", {"memory_type": "semantic", "user_id": "a\x00"}, "user_id"),
        ("list_memories", {"memory_type": "semantic", "user_id": "alice", "q": "a\x00"}, "q"),
        ("get_memory", {"memory_type": "semantic", "memory_id": "a\x00b"}, "item_id"),
        ("update_memory", {"memory_type": "semantic", "memory_id": "a\x00b", "summary": "x"}, "item_id"),
        ("memory_history", {"memory_type": "episodic", "memory_id": "a\x00b"}, "item_id"),
        ("get_profile", {"profile_id": "a\x00b"}, "profile_id"),
        ("list_entities", {"user_id": "a\x00"}, "user_id"),
        ("delete_session", {"session_id": "a\x00b", "user_id": "alice"}, "session_id"),
        ("apply_skill", {"skill_id": "a\x00b", "user_id": "alice", "session_id": "task-1"}, "skill_id"),
        (
            "skill_feedback",
            {"skill_id": "a\x00b", "user_id": "alice", "session_id": "task-1", "verdict": "hurt"},
            "skill_id",
        ),
    ],
)
def test_a_nul_in_any_argument_is_refused_naming_it(connect_as, client_a, tool, arguments, field):
    eraser = ClientFactory(organization=client_a.organization, can_erase=True)
    result = call(connect_as(eraser), tool, arguments)
    assert result.is_error
    assert f"Failed (400 invalid): Invalid input: {field}: Must not contain NUL" in text(result)
    assert not Message.objects.exists() and not ErasureRequest.objects.exists()


def test_read_only_clients_see_the_write_tools_refused(connect_as, client_a):
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")

    async def scenario(session):
        return {
            "add": await session.call_tool(
                "add_memory",
                {
                    "user_id": "alice",
                    "session_id": "chat-1",
                    "messages": [{"role": "user", "content": "hi"}],
                },
            ),
            "delete": await session.call_tool(
                "delete_memory", {"memory_type": "semantic", "memory_id": str(sister.pk)}
            ),
            "search": await session.call_tool("search_memory", {"user_id": "alice", "query": "sister"}),
        }

    results = run(connect_as(reader), scenario)

    for name in ("add", "delete"):
        assert results[name].is_error and READ_ONLY in text(results[name]), name
    assert not results["search"].is_error
    assert [hit["id"] for hit in results["search"].structured_content["results"]] == [str(sister.pk)]
    assert SemanticMemory.objects.filter(pk=sister.pk).exists()


def test_erasure_needs_the_can_erase_permission(connect_as, client_a, add_messages):
    """A writer without can_erase is refused before the subject is looked up, as in the REST API."""
    add_messages(client_a, user_id="alice", session_id="chat-1")

    refused = call(connect_as(client_a), "erase_user", {"user_id": "alice"})
    unknown = call(connect_as(client_a), "erase_user", {"user_id": "nobody"})

    assert refused.is_error and NO_ERASE in text(refused)
    assert unknown.is_error and NO_ERASE in text(unknown)
    assert not ErasureRequest.objects.exists()


def test_scopes_apply_as_in_the_rest_api(connect_as, client_a):
    """Unreadable scopes are invisible (404); readable but not writable ones are refused (403)."""
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")
    elsewhere = ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other"])
    shared_reader = ClientFactory(
        organization=client_a.organization, write_scope="other", read_scopes=["other", "default"]
    )
    delete = {"memory_type": "semantic", "memory_id": str(sister.pk)}

    unreadable = call(connect_as(elsewhere), "delete_memory", delete)
    readable = call(connect_as(shared_reader), "delete_memory", delete)
    search = call(connect_as(elsewhere), "search_memory", {"user_id": "alice", "query": "sister"})

    assert unreadable.is_error and NOT_FOUND in text(unreadable)
    assert readable.is_error and "Refused (403 permission_denied): This item belongs to scope 'default'" in text(
        readable
    )
    assert search.structured_content["results"] == [] and text(search) == "No results for 'sister'."
    assert SemanticMemory.objects.filter(pk=sister.pk).exists()


def test_other_organisations_see_nothing(connect_as, client_a, foreign_client, add_messages):
    foreign_client.can_erase = True
    foreign_client.save(update_fields=["can_erase"])
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")
    SkillFactory(organization=client_a.organization, name="book-flight")
    add_messages(client_a, user_id="alice", session_id="chat-1")

    async def scenario(session):
        return {
            "search": await session.call_tool("search_memory", {"user_id": "alice", "query": "sister"}),
            "skills": await session.call_tool("retrieve_skills", {"task": "book a flight for a customer"}),
            "sessions": await session.call_tool("list_sessions", {}),
            "session": await session.call_tool("get_session", {"user_id": "alice", "session_id": "chat-1"}),
            "delete": await session.call_tool(
                "delete_memory", {"memory_type": "semantic", "memory_id": str(sister.pk)}
            ),
            "erase": await session.call_tool("erase_user", {"user_id": "alice"}),
        }

    results = run(connect_as(foreign_client), scenario)

    assert results["search"].structured_content["results"] == []
    assert results["skills"].structured_content["skills"] == []
    assert results["sessions"].structured_content["count"] == 0
    for name in ("session", "delete", "erase"):
        assert results[name].is_error and NOT_FOUND in text(results[name]), name
    assert SemanticMemory.objects.filter(pk=sister.pk).exists() and Skill.objects.exists()
    assert not ErasureRequest.objects.exists()


def test_a_session_id_in_several_readable_scopes_is_named_by_scope(connect_as, client_a, add_messages):
    other_writer = ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other"])
    add_messages(client_a, user_id="alice", session_id="chat-1")
    add_messages(
        other_writer, user_id="alice", session_id="chat-1", messages=[{"role": "user", "content": "elsewhere"}]
    )
    auditor = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default", "other"])

    ambiguous = call(connect_as(auditor), "get_session", {"user_id": "alice", "session_id": "chat-1"})
    named = call(connect_as(auditor), "get_session", {"user_id": "alice", "session_id": "chat-1", "scope": "other"})

    assert ambiguous.is_error
    assert "Failed (400 invalid): Invalid input: scope: Session 'chat-1' exists in several scopes" in text(ambiguous)
    assert named.structured_content["scope"] == "other"
    assert [m["content"] for m in named.structured_content["messages"]] == ["elsewhere"]


def test_the_arguments_the_tools_lacked_reach_the_platform(connect_as, client_a, add_messages):
    """search_memory finds topic pages and takes the REST filters and time_window; get_context takes
    the session's scope; list_sessions takes start and end (tests/mcp_server/test_contract.py)."""
    topic = make_topic(client_a, "alice", "Trips to Lisbon: the flights, the hotel and the sister's flat.")
    add_messages(client_a, user_id="alice", session_id="chat-1")
    connect = connect_as(client_a)

    async def scenario(session):
        return {
            "topics": await session.call_tool(
                "search_memory", {"user_id": "alice", "query": "Lisbon trips", "memory_types": ["topic"]}
            ),
            "window": await session.call_tool(
                "search_memory",
                {"user_id": "alice", "query": "hiking in May 2023", "time_window": "filter", "session_tag": "task"},
            ),
            "off": await session.call_tool(
                "search_memory", {"user_id": "alice", "query": "hiking in May 2023", "time_window": "off"}
            ),
            "context": await session.call_tool(
                "get_context", {"user_id": "alice", "query": "Lisbon", "session_id": "chat-1", "scope": "default"}
            ),
            "recent": await session.call_tool("list_sessions", {"start": "2000-01-01T00:00:00Z"}),
            "future": await session.call_tool("list_sessions", {"start": "2199-01-01T00:00:00Z"}),
        }

    results = run(connect, scenario)

    assert not any(result.is_error for result in results.values()), {k: text(v) for k, v in results.items()}
    assert [hit["id"] for hit in results["topics"].structured_content["results"]] == [str(topic.pk)]
    assert f"topic {topic.name} (revision 1)" in text(results["topics"])
    window = results["window"].structured_content["time_window"]
    assert (window["start"], window["end"], window["mode"]) == ("2023-05-01", "2023-05-31", "filter")
    assert "2023-05-01 to 2023-05-31, filter" in text(results["window"])
    assert results["off"].structured_content["time_window"] is None
    assert results["context"].structured_content["session_id"] == "chat-1"
    assert results["recent"].structured_content["count"] == 1
    assert results["future"].structured_content["count"] == 0


def test_the_agent_tools(connect_as, client_a, add_messages):
    """get_context, the memory management tools, get_profile, list_entities and delete_session, each
    answering what its REST endpoint answers."""
    add_messages(client_a, user_id="alice", session_id="chat-1", messages=CONVERSATION)
    add_messages(client_a, user_id="alice", session_id="chat-2", messages=[{"role": "user", "content": "Ana paints."}])
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")
    profile = make_profile(client_a, "alice", "Alice's sister Ana lives in Lisbon and paints.")
    memory = {"memory_type": "semantic", "memory_id": str(sister.pk)}

    async def scenario(session):
        return {
            "context": await session.call_tool(
                "get_context",
                {
                    "user_id": "alice",
                    "messages": [{"role": "user", "content": "Where does my sister live?"}],
                    "max_tokens": 300,
                },
            ),
            "list": await session.call_tool("list_memories", {"memory_type": "semantic", "user_id": "alice"}),
            "get": await session.call_tool("get_memory", memory),
            "update": await session.call_tool(
                "update_memory", {**memory, "summary": "Alice's sister lives in Porto", "reason": "she moved"}
            ),
            "history": await session.call_tool("memory_history", memory),
            "profile": await session.call_tool("get_profile", {"profile_id": str(profile.pk)}),
            "entities": await session.call_tool("list_entities", {"user_id": "alice"}),
            "delete": await session.call_tool("delete_session", {"session_id": "chat-2", "user_id": "alice"}),
        }

    results = run(connect_as(client_a), scenario)

    assert not any(result.is_error for result in results.values()), {k: text(r) for k, r in results.items()}
    context = results["context"].structured_content
    assert context["tokens"] <= 300 and text(results["context"]) == context["text"]
    assert any(item["id"] == str(sister.pk) and item["memory_type"] == "semantic" for item in context["items"])
    assert "sister: Alice's sister lives in Lisbon" in context["text"]
    assert results["list"].structured_content["count"] == 1
    assert f"[semantic] id={sister.pk} sister: Alice's sister lives in Lisbon" in text(results["list"])
    assert results["get"].structured_content["summary"] == "Alice's sister lives in Lisbon"
    assert results["update"].structured_content["summary"] == "Alice's sister lives in Porto"
    sister.refresh_from_db()
    assert sister.summary == "Alice's sister lives in Porto"
    changes = results["history"].structured_content["changes"]
    assert [change["operation"] for change in changes] == ["update"]
    assert changes[0]["actor"] == f"client:{client_a.pk}" and "update by client:" in text(results["history"])
    assert text(results["profile"]).startswith(f"Profile of {profile.name} (revision 1, active)")
    assert results["entities"].structured_content["count"] == 1  # the page's entity
    assert f"- {profile.name} (person, 0 mention(s)) id={profile.entity_id}" in text(results["entities"])
    assert results["delete"].structured_content["status"] == "queued"
    assert text(results["delete"]).startswith("Deletion of session chat-2 accepted: task ")


def test_the_agent_tools_keep_to_the_callers_scopes(connect_as, client_a, foreign_client, add_messages):
    add_messages(client_a, user_id="alice", session_id="chat-1")
    sister = semantic(client_a.organization, "default", "alice", "sister", "Alice's sister lives in Lisbon")
    profile = make_profile(client_a, "alice", "Alice's sister Ana lives in Lisbon and paints.")
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    memory = {"memory_type": "semantic", "memory_id": str(sister.pk)}

    async def scenario(session):
        return {
            "context": await session.call_tool("get_context", {"user_id": "alice", "query": "sister"}),
            "list": await session.call_tool("list_memories", {"memory_type": "semantic", "user_id": "alice"}),
            "get": await session.call_tool("get_memory", memory),
            "update": await session.call_tool("update_memory", {**memory, "summary": "changed"}),
            "history": await session.call_tool("memory_history", memory),
            "profile": await session.call_tool("get_profile", {"profile_id": str(profile.pk)}),
            "delete": await session.call_tool("delete_session", {"session_id": "chat-1", "user_id": "alice"}),
        }

    foreign = run(connect_as(foreign_client), scenario)
    assert foreign["context"].structured_content["items"] == [] and foreign["list"].structured_content["count"] == 0
    for name in ("get", "update", "history", "profile", "delete"):
        assert foreign[name].is_error and NOT_FOUND in text(foreign[name]), name
    read_only = run(connect_as(reader), scenario)
    assert not read_only["get"].is_error and not read_only["context"].is_error
    for name in ("update", "delete"):
        assert read_only[name].is_error and READ_ONLY in text(read_only[name]), name
    sister.refresh_from_db()
    assert sister.summary == "Alice's sister lives in Lisbon"


def test_the_skill_tools(connect_as, client_a, foreign_client):
    """apply_skill marks the uses the session's retrieval recorded (once: again changes nothing);
    skill_feedback records a verdict with the client as its actor; a session that never retrieved the
    skill is a conflict, a read-only client is refused and another organisation sees no skill."""
    skill = SkillFactory(organization=client_a.organization, name="book-flight")
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    task = {"user_id": "alice", "session_id": "task-1"}
    apply = {"skill_id": str(skill.pk), **task}
    verdict = {**apply, "verdict": "hurt", "reason": "It skipped the payment step."}

    async def retrieved_then_judged(session):
        results = {
            "retrieve": await session.call_tool("retrieve_skills", {"task": "book a flight for a customer", **task}),
            "apply": await session.call_tool("apply_skill", apply),
            "again": await session.call_tool("apply_skill", apply),
        }
        results["add"] = await session.call_tool(
            "add_memory", {**task, "messages": [{"role": "user", "content": "Book it."}], "session_tag": "task"}
        )
        results["feedback"] = await session.call_tool("skill_feedback", verdict)
        results["unretrieved"] = await session.call_tool("apply_skill", {**apply, "session_id": "task-2"})
        return results

    results = run(connect_as(client_a), retrieved_then_judged)

    for name in ("retrieve", "apply", "again", "add", "feedback"):
        assert not results[name].is_error, text(results[name])
    use = SkillUse.objects.get(skill=skill)
    assert (use.session_id, use.end_user.user_id, use.client_id) == ("task-1", "alice", client_a.pk)
    assert use.applied_at is not None
    for name in ("apply", "again"):
        assert results[name].structured_content["applied"] == 1
        assert results[name].structured_content["applied_at"] == use.applied_at.isoformat().replace("+00:00", "Z")
    assert text(results["apply"]).startswith(f"Marked 1 use(s) of skill {skill.pk} in session task-1 as applied")
    feedback = SkillFeedback.objects.get(skill=skill)
    assert (feedback.verdict, feedback.reason, feedback.session_id) == (
        "hurt",
        "It skipped the payment step.",
        "task-1",
    )
    assert (feedback.client_id, feedback.actor, feedback.end_user.user_id) == (
        client_a.pk,
        f"client:{client_a.name}",
        "alice",
    )
    assert results["feedback"].structured_content["id"] == str(feedback.pk)
    assert text(results["feedback"]) == (
        f"Recorded 'hurt' on skill {skill.pk} v{skill.version} for session task-1, by client:{client_a.name}."
    )
    assert results["unretrieved"].is_error
    assert "Conflict (409 conflict): Session 'task-2' of this user never retrieved this skill" in text(
        results["unretrieved"]
    )

    async def refused(session):
        return {
            "apply": await session.call_tool("apply_skill", apply),
            "feedback": await session.call_tool("skill_feedback", verdict),
        }

    for client, message in ((reader, READ_ONLY), (foreign_client, NOT_FOUND)):
        for name, result in run(connect_as(client), refused).items():
            assert result.is_error and message in text(result), (client.name, name, text(result))
    assert SkillFeedback.objects.count() == 1
