"""The MCP tools under the REST API's rules, in process (the tools and the platform backend, without
the HTTP transport): each tool × each family of hostile input is refused naming the argument and
stores nothing, and each id-taking tool × each tenancy role answers as the REST matrix does."""

import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from mcp.server.mcpserver.exceptions import ToolError
from memory_platform_client.mcp_server.tools import build_server

from apps.conversations.models import Message
from apps.mcp_server.backend import PlatformBackend
from tests.core.test_hostile import stored_state
from tests.factories import ClientFactory
from tests.test_cross_organization import ROLES, alpha_rows, expect, neighbours  # noqa: F401 - a fixture

NUL = "\x00"
SURROGATE = "\ud800"
STATUS = re.compile(r"\((\d{3}) [a-z_]+\)")


def call_tool(client, name: str, arguments: dict):
    """(status, text): 200 and the tool's text, or the refusal's status and text."""
    server = build_server(lambda ctx: PlatformBackend(client=client))
    try:
        # The operations run on this thread, inside the test's transaction (see PlatformBackend).
        result = async_to_sync(server.call_tool)(name, arguments)
    except ToolError as exc:
        found = STATUS.search(str(exc))
        return (int(found.group(1)) if found else 422), str(exc)  # 422: refused by the tool's argument schema
    return 200, result.content[0].text


def deep(depth: int):
    value = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def add(**overrides):
    return (
        "add_memory",
        {"user_id": "u1", "session_id": "s2", "messages": [{"role": "user", "content": "hi"}], **overrides},
    )


def turn(**fields):
    return add(messages=[{"role": "user", "content": "hi", **fields}])


def search(**overrides):
    return ("search_memory", {"user_id": "u1", "query": "hello", **overrides})


def retrieve(**overrides):
    return ("retrieve_skills", {"task": "book a flight", **overrides})


SKILL_ID = "0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31"


def apply(**overrides):
    return ("apply_skill", {"skill_id": SKILL_ID, "user_id": "u1", "session_id": "s1", **overrides})


def feedback(**overrides):
    return (
        "skill_feedback",
        {"skill_id": SKILL_ID, "user_id": "u1", "session_id": "s1", "verdict": "hurt", "reason": "r", **overrides},
    )


def get_session(**overrides):
    return ("get_session", {"session_id": "s1", "user_id": "u1", **overrides})


# (id, (tool, arguments), status, text the refusal must contain)
CASES = [
    ("nul-add-user-id", add(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-add-session-id", add(session_id=f"s{NUL}"), 400, "session_id"),
    ("nul-add-content", turn(content=f"a{NUL}b"), 400, "messages.0.content"),
    ("nul-add-content-part", turn(content=[{"type": "text", "text": f"a{NUL}"}]), 400, "messages.0.content.0.text"),
    ("nul-add-name", turn(name=f"n{NUL}"), 400, "messages.0.name"),
    (
        "nul-add-tool-call-id",
        add(messages=[{"role": "tool", "content": "ok", "tool_call_id": f"c{NUL}"}]),
        400,
        "messages.0.tool_call_id",
    ),
    ("nul-search-query", search(query=f"a{NUL}"), 400, "query"),
    ("nul-search-user-id", search(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-search-session-id", search(session_id=f"s{NUL}"), 400, "session_id"),
    ("nul-retrieve-task", retrieve(task=f"book{NUL}"), 400, "task"),
    ("nul-retrieve-user-id", retrieve(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-retrieve-session-id", retrieve(user_id="u1", session_id=f"s{NUL}"), 400, "session_id"),
    ("session-without-its-user", retrieve(session_id="s1"), 400, "user_id"),
    ("nul-list-user-id", ("list_sessions", {"user_id": f"u{NUL}"}), 400, "user_id"),
    ("nul-get-session-id", get_session(session_id=f"a{NUL}b"), 400, "session_id"),
    ("nul-get-user-id", get_session(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-get-scope", get_session(scope=f"d{NUL}"), 400, "scope"),
    ("nul-delete-id", ("delete_memory", {"memory_type": "semantic", "memory_id": f"a{NUL}"}), 400, "item_id"),
    ("nul-erase-user-id", ("erase_user", {"user_id": f"u{NUL}"}), 400, "user_id"),
    ("nul-consolidate-user-id", ("consolidate_memories", {"user_id": f"u{NUL}"}), 400, "user_id"),
    ("nul-apply-skill-id", apply(skill_id=f"a{NUL}b"), 400, "skill_id"),
    ("nul-apply-user-id", apply(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-apply-session-id", apply(session_id=f"s{NUL}"), 400, "session_id"),
    ("nul-feedback-skill-id", feedback(skill_id=f"a{NUL}b"), 400, "skill_id"),
    ("nul-feedback-user-id", feedback(user_id=f"u{NUL}"), 400, "user_id"),
    ("nul-feedback-session-id", feedback(session_id=f"s{NUL}"), 400, "session_id"),
    ("nul-feedback-verdict", feedback(verdict=f"hurt{NUL}"), 422, "verdict"),
    ("nul-feedback-reason", feedback(reason=f"r{NUL}"), 400, "reason"),
    ("surrogate-apply-user-id", apply(user_id=SURROGATE), 400, "user_id"),
    ("surrogate-feedback-reason", feedback(reason=SURROGATE), 400, "reason"),
    ("surrogate-consolidate-user-id", ("consolidate_memories", {"user_id": SURROGATE}), 400, "user_id"),
    ("surrogate-add-content", turn(content=f"a{SURROGATE}"), 400, "messages.0.content"),
    ("surrogate-add-user-id", add(user_id=SURROGATE), 400, "user_id"),
    ("surrogate-search-query", search(query=SURROGATE), 400, "query"),
    ("surrogate-retrieve-task", retrieve(task=SURROGATE), 400, "task"),
    ("surrogate-get-user-id", get_session(user_id=SURROGATE), 400, "user_id"),
    ("surrogate-erase-user-id", ("erase_user", {"user_id": SURROGATE}), 400, "user_id"),
    ("deep-add-content-part", turn(content=[deep(40)]), 400, "nested deeper than 32"),
    (
        "deep-add-tool-arguments",
        add(
            messages=[
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep(40)}}],
                }
            ]
        ),
        400,
        "nested deeper than 32",
    ),
    (
        "nan-add-content-part",
        turn(content=[{"type": "text", "text": "x", "v": float("nan")}]),
        400,
        "messages.0.content.0.v: Numbers must be finite",
    ),
    (
        "infinity-add-tool-arguments",
        add(
            messages=[
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": float("inf")}}}
                    ],
                }
            ]
        ),
        400,
        "Numbers must be finite",
    ),
    (
        "minus-infinity-add-content-part",
        turn(content=[{"type": "text", "text": "x", "v": float("-inf")}]),
        400,
        "Numbers must be finite",
    ),
    ("offset-10e20-list", ("list_sessions", {"offset": 10**20}), 400, "offset"),
    ("offset-10e20-get", get_session(offset=10**20), 400, "offset"),
    ("offset-negative-get", get_session(offset=-1), 422, "offset"),
    ("limit-zero-search", search(limit=0), 422, "limit"),
    ("k-too-many", retrieve(k=10**20), 422, "k"),
    ("role-unknown", turn(role="robot"), 422, "role"),
    ("content-missing", add(messages=[{"role": "user"}]), 400, "messages.0.content"),
    ("session-id-newline", add(session_id="s\n2"), 400, "session_id"),
    ("user-id-too-long", add(user_id="u" * 256), 400, "user_id"),
    ("scope-pattern", get_session(scope="not a scope"), 400, "scope"),
    ("date-month-13", turn(occurred_at="2024-13-01T00:00:00Z"), 400, "messages.0.occurred_at"),
    ("date-1899", turn(occurred_at="1899-12-31T23:59:59Z"), 400, "years 1900 to 2199"),
    ("date-garbage", turn(occurred_at="yesterday"), 400, "messages.0.occurred_at"),
    (
        "memory-type-unknown",
        ("delete_memory", {"memory_type": "profile", "memory_id": str(uuid.uuid4())}),
        422,
        "memory_type",
    ),
    ("search-method-unknown", search(search_method="grep"), 422, "search_method"),
    ("verdict-unknown", feedback(verdict="great"), 422, "verdict"),
    ("reason-too-long", feedback(reason="r" * 2001), 400, "reason"),
    ("session-id-newline-apply", apply(session_id="s\n1"), 400, "session_id"),
    ("skill-id-not-a-uuid", apply(skill_id="not-a-uuid"), 404, "not found"),
]


@pytest.fixture
def hostile_client(db, add_messages):
    """A client that may do everything (erasure too), with one session `s1` of user `u1` already stored."""
    client = ClientFactory(can_erase=True)
    add_messages(client, user_id="u1", session_id="s1")
    return client


@pytest.mark.parametrize("call,status,expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_hostile_arguments_are_refused_naming_them_and_store_nothing(hostile_client, call, status, expected):
    tool, arguments = call
    before = stored_state()
    answered, text = call_tool(hostile_client, tool, arguments)
    assert answered == status, text[:500]
    assert expected.lower() in text.lower(), text[:500]
    assert stored_state() == before


def test_every_tool_and_family_has_cases():
    tools = {case[1][0] for case in CASES}
    assert tools == {
        "add_memory",
        "search_memory",
        "retrieve_skills",
        "list_sessions",
        "get_session",
        "delete_memory",
        "erase_user",
        "consolidate_memories",
        "apply_skill",
        "skill_feedback",
    }
    families = {case[0].split("-")[0] for case in CASES}
    assert {"nul", "surrogate", "deep", "nan", "infinity", "offset", "role", "date"} <= families


def test_the_valid_call_next_to_each_family_is_accepted(hostile_client):
    """The refusals above are about the bad value: the same call with a good one is stored."""
    before = Message.objects.count()
    status, text = call_tool(hostile_client, *turn(content=[{"type": "text", "text": "x", "v": 1.5}]))
    assert status == 200, text
    assert Message.objects.count() == before + 1


# --- tenancy: each id-taking tool × each role, as tests/test_cross_organization.py does for REST ---------


def _session(client, add_messages):
    add_messages(client, user_id="owner", session_id="sess-x")
    missing = f"sess-{uuid.uuid4().hex[:8]}"
    return ("get_session", {"session_id": "sess-x", "user_id": "owner"}), (
        "get_session",
        {"session_id": missing, "user_id": "owner"},
    )


def _deletion(memory_type):
    def make(client, add_messages):
        if memory_type == "message":
            add_messages(client, user_id="owner", session_id="sess-m")
            item = Message.objects.filter(
                session__organization=client.organization, session__session_id="sess-m"
            ).first()
        elif memory_type == "procedural":
            from tests.skills.factories import SkillFactory

            item = SkillFactory(organization=client.organization, scope=client.write_scope)
        else:
            from tests.memories.makers import MAKERS

            item = MAKERS[memory_type](client, "owner", f"{memory_type} memory of {client.name}")
        return (
            ("delete_memory", {"memory_type": memory_type, "memory_id": str(item.pk)}),
            ("delete_memory", {"memory_type": memory_type, "memory_id": str(uuid.uuid4())}),
        )

    return make


def _erasure(client, add_messages):
    add_messages(client, user_id="erase-me", session_id="sess-e")
    return ("erase_user", {"user_id": "erase-me"}), ("erase_user", {"user_id": f"erase-{uuid.uuid4().hex[:8]}"})


def _consolidation(client, add_messages):
    from tests.memories.makers import make_semantic

    make_semantic(client, "owner", f"a fact of {client.name}")
    missing = f"owner-{uuid.uuid4().hex[:8]}"
    return ("consolidate_memories", {"user_id": "owner"}), ("consolidate_memories", {"user_id": missing})


def _skill_use(client, add_messages):
    from apps.skills.models import SkillUse
    from apps.tenancy.services import end_user_get_or_create
    from tests.skills.factories import SkillFactory

    skill = SkillFactory(organization=client.organization, scope=client.write_scope)
    SkillUse.objects.create(
        organization=client.organization,
        scope=skill.scope,
        skill=skill,
        version=skill.version,
        rank=1,
        score=0.1,
        client=client,
        end_user=end_user_get_or_create(organization=client.organization, user_id="owner"),
        session_scope=client.write_scope,
        session_id="sess-u",
    )
    arguments = {"user_id": "owner", "session_id": "sess-u"}
    return (
        ("apply_skill", {"skill_id": str(skill.pk), **arguments}),
        ("apply_skill", {"skill_id": str(uuid.uuid4()), **arguments}),
    )


def _skill_feedback(client, add_messages):
    from tests.skills.factories import SkillFactory

    skill = SkillFactory(organization=client.organization, scope=client.write_scope)
    add_messages(client, user_id="owner", session_id="sess-f", session_tag="task", seal=True)  # the verdict's session
    arguments = {"user_id": "owner", "session_id": "sess-f", "verdict": "hurt", "reason": "It skipped a step."}
    return (
        ("skill_feedback", {"skill_id": str(skill.pk), **arguments}),
        ("skill_feedback", {"skill_id": str(uuid.uuid4()), **arguments}),
    )


READ = expect(200, 200, 404, 404, 404, 404)
DELETE = expect(200, 403, 404, 403, 404, 404)
ERASE = expect(200, 403, 403, 403, 200, 404)
TOOLS = {
    "get_session": (_session, READ),
    "delete_memory-message": (_deletion("message"), DELETE),
    "delete_memory-episodic": (_deletion("episodic"), DELETE),
    "delete_memory-semantic": (_deletion("semantic"), DELETE),
    "delete_memory-procedural": (_deletion("procedural"), DELETE),
    "erase_user": (_erasure, ERASE),
    "consolidate_memories": (_consolidation, expect(200, 403, 404, 403, 404, 404)),
    "apply_skill": (_skill_use, expect(200, 403, 404, 403, 404, 404)),
    "skill_feedback": (_skill_feedback, expect(200, 403, 404, 403, 404, 404)),
}


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("tool", TOOLS)
def test_each_neighbour_gets_only_what_the_rule_allows(tool, role, neighbours, add_messages):  # noqa: F811
    make, expected = TOOLS[tool]
    owner, caller = neighbours["owner"], neighbours[role]
    call, missing = make(owner, add_messages)
    before = alpha_rows(owner.organization)

    status, text = call_tool(caller, *call)

    assert status == expected[role], text
    if status >= 400:
        assert call_tool(caller, *missing) == (status, text), "a refusal never confirms that the id exists"
        assert alpha_rows(owner.organization) == before, "a refused call changes nothing"
