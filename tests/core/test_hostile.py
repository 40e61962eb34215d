"""Hand-made hostile input, one row per case (issue 17): every family that once answered 500.

Each case must answer a 4xx with the platform's JSON error shape, name what was wrong, and store
nothing: no session, turn, user, task or idempotency record, and no change to the existing session.
"""

import json
import re

import pytest

from apps.conversations.models import IngestRequest, Message, Session
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.tenancy.models import EndUser
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

NUL = "\x00"
SURROGATE = "\ud800"


DEEP = re.compile(r'"@@deep:(\d+):(list|dict)@@"')


def nested(depth: int, container="list"):
    """A value `depth` containers deep, written as JSON text by `send` (json.dumps would recurse)."""
    return f"@@deep:{depth}:{container}@@"


def nested_text(match) -> str:
    depth, container = int(match.group(1)), match.group(2)
    opening, closing = ("[", "]") if container == "list" else ('{"k":', "}")
    return opening * depth + '"x"' + closing * depth


def add_body(**overrides):
    body = {"user_id": "u1", "session_id": "s2", "messages": [{"role": "user", "content": "hello"}]}
    body.update(overrides)
    return body


def message(**fields):
    return add_body(messages=[{"role": "user", "content": "hello", **fields}])


def tool_call(name="lookup", arguments="{}"):
    return add_body(
        messages=[
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}],
            }
        ]
    )


def search_body(**overrides):
    return {"user_id": "u1", "query": "hello", **overrides}


ADD = ("POST", "/api/v1/memory/add")
SEARCH = ("POST", "/api/v1/memory/search")
RETRIEVE = ("POST", "/api/v1/skills/retrieve")
CONTEXT = ("POST", "/api/v1/memory/context")
FEEDBACK = ("POST", "/api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/feedback")
USES = ("POST", "/api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/uses")


def feedback(**overrides):
    return {"user_id": "u1", "session_id": "s1", "verdict": "hurt", "reason": "It skipped a step.", **overrides}


SEMANTIC = ("POST", "/api/v1/memory/semantic/")
CHECKPOINTS = ("POST", "/api/v1/checkpoints/")
CHECKPOINT_WRITES = ("POST", "/api/v1/checkpoints/writes")


def checkpoint(**overrides):
    body = {"user_id": "u1", "thread_id": "t1", "checkpoint_id": "c1", "checkpoint": {"type": "json", "data": "e30="}}
    return {**body, **overrides}


def writes_body(writes=None, **write):
    one = {"idx": 0, "channel": "c", "value": {"type": "json", "data": "e30="}, **write}
    return {
        "user_id": "u1",
        "thread_id": "t1",
        "checkpoint_id": "c1",
        "task_id": "k",
        "writes": [one] if writes is None else writes,
    }


EPISODIC = ("POST", "/api/v1/memory/episodic/")
CONSOLIDATE = ("POST", "/api/v1/memory/consolidate")
TOPICS = ("POST", "/api/v1/topics/compile")


def fact(**overrides):
    return {"user_id": "u1", "name": "Caroline", "summary": "Caroline is from Sweden.", **overrides}


def event(**overrides):
    return {
        "user_id": "u1",
        "summary": "Caroline went to a support group.",
        "occurred_at": "2023-05-07T00:00:00Z",
        **overrides,
    }


def post(target, body):
    return (*target, body)


def get(path):
    return ("GET", path, None)


# (id, (method, path, JSON body or raw text or None), text the error message must contain)
WEBHOOKS = ("POST", "/api/v1/webhooks/")

CASES = [
    # --- NUL characters, wherever a string reaches the database -------------------------------------
    ("nul-content", post(ADD, message(content=f"a{NUL}b")), "messages.0.content"),
    (
        "nul-content-part",
        post(ADD, message(content=[{"type": "text", "text": f"a{NUL}"}])),
        "messages.0.content.0.text",
    ),
    ("nul-name", post(ADD, message(name=f"n{NUL}")), "messages.0.name"),
    (
        "nul-tool-call-id",
        post(ADD, add_body(messages=[{"role": "tool", "content": "ok", "tool_call_id": f"c{NUL}"}])),
        "messages.0.tool_call_id",
    ),
    ("nul-tool-name", post(ADD, tool_call(name=f"look{NUL}up")), "messages.0.tool_calls.0.function.name"),
    (
        "nul-tool-arguments",
        post(ADD, tool_call(arguments=f'{{"a": "{NUL}"}}')),
        "messages.0.tool_calls.0.function.arguments",
    ),
    ("nul-metadata-value", post(ADD, message(metadata={"k": f"v{NUL}"})), "messages.0.metadata.k"),
    (
        "nul-metadata-key",
        post(ADD, message(metadata={f"k{NUL}": "v"})),
        "messages.0.metadata: A key must not contain NUL",
    ),
    ("nul-filter-tags-value", post(ADD, add_body(filter_tags={"team": f"a{NUL}"})), "filter_tags.team"),
    ("nul-filter-tags-key", post(ADD, add_body(filter_tags={f"t{NUL}": "a"})), "filter_tags: A key"),
    ("nul-user-id", post(ADD, add_body(user_id=f"u{NUL}1")), "user_id"),
    ("nul-session-id", post(ADD, add_body(session_id=f"s{NUL}")), "session_id"),
    ("nul-outcome", post(ADD, add_body(outcome=f"success{NUL}")), "outcome"),
    ("nul-session-tag", post(ADD, add_body(session_tag=f"task{NUL}")), "session_tag"),
    ("nul-occurred-at", post(ADD, message(occurred_at=f"2024-01-01T00:00:00Z{NUL}")), "messages.0.occurred_at"),
    ("nul-unknown-field-name", post(ADD, add_body(**{f"x{NUL}": 1})), "A key must not contain NUL"),
    (
        "nul-one-turn-of-500",
        post(
            ADD,
            add_body(
                messages=[{"role": "user", "content": f"turn {n}"} for n in range(499)]
                + [{"role": "user", "content": f"last{NUL}"}]
            ),
        ),
        "messages.499.content",
    ),
    ("nul-raw-in-body", ("POST", "/api/v1/memory/add", '{"user_id": "u1\x00"}'), "NUL"),
    ("nul-search-query", post(SEARCH, search_body(query=f"hel{NUL}lo")), "query"),
    ("nul-search-user-id", post(SEARCH, search_body(user_id=f"u{NUL}")), "user_id"),
    ("nul-search-filter-tags-value", post(SEARCH, search_body(filter_tags={"a": f"b{NUL}"})), "filter_tags.a"),
    ("nul-search-filter-tags-key", post(SEARCH, search_body(filter_tags={f"a{NUL}": "b"})), "filter_tags: A key"),
    ("nul-search-memory-type", post(SEARCH, search_body(memory_types=[f"message{NUL}"])), "memory_types.0"),
    ("nul-search-method", post(SEARCH, search_body(search_method=f"bm25{NUL}")), "search_method"),
    ("nul-search-session-id", post(SEARCH, search_body(session_id=f"s{NUL}")), "session_id"),
    ("nul-get-search-query", get("/api/v1/memory/search?user_id=u1&query=a%00b"), "query"),
    ("nul-get-search-user-id", get("/api/v1/memory/search?user_id=u%001"), "user_id"),
    (
        "nul-get-search-filter-tags",
        get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%22%3A%22%5Cu0000%22%7D"),
        "filter_tags",
    ),
    (
        "nul-get-search-filter-tags-raw",
        get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%00%22%3A1%7D"),
        "filter_tags",
    ),
    ("nul-search-all-users-query", get("/api/v1/memory/search_all_users?query=%00"), "query"),
    (
        "nul-search-all-users-filter-tags",
        get("/api/v1/memory/search_all_users?filter_tags=%7B%22%5Cu0000%22%3A1%7D"),
        "filter_tags",
    ),
    ("nul-parameter-name", get("/api/v1/memory/search_all_users?a%00b=1"), "A parameter name"),
    ("nul-retrieve-task", post(RETRIEVE, {"task": f"book{NUL}"}), "task"),
    ("nul-retrieve-user-id", post(RETRIEVE, {"task": "book", "user_id": f"u{NUL}"}), "user_id"),
    (
        "nul-retrieve-session-id",
        post(RETRIEVE, {"task": "book", "user_id": "u1", "session_id": f"s{NUL}"}),
        "session_id",
    ),
    ("nul-path-skill-feedback", post(("POST", "/api/v1/skills/a%00b/feedback"), feedback()), "skill_id"),
    ("nul-feedback-reason", post(FEEDBACK, feedback(reason=f"r{NUL}")), "reason"),
    ("nul-feedback-verdict", post(FEEDBACK, feedback(verdict=f"hurt{NUL}")), "verdict"),
    ("nul-feedback-session-id", post(FEEDBACK, feedback(session_id=f"s{NUL}")), "session_id"),
    (
        "nul-path-skill-uses",
        post(("POST", "/api/v1/skills/a%00b/uses"), {"user_id": "u1", "session_id": "s1"}),
        "skill_id",
    ),
    ("nul-uses-user-id", post(USES, {"user_id": f"u{NUL}", "session_id": "s1"}), "user_id"),
    ("nul-path-session-get", get("/api/v1/sessions/a%00b/?user_id=u1"), "session_id"),
    ("nul-path-session-user", get("/api/v1/sessions/s1/?user_id=u%001"), "user_id"),
    ("nul-path-session-scope", get("/api/v1/sessions/s1/?user_id=u1&scope=d%00"), "scope"),
    ("nul-path-seal", ("POST", "/api/v1/sessions/a%00b/seal?user_id=u1", None), "session_id"),
    ("nul-path-distill", ("POST", "/api/v1/sessions/a%00b/distill?user_id=u1", None), "session_id"),
    ("nul-patch-outcome", ("PATCH", "/api/v1/sessions/s1/?user_id=u1", {"outcome": f"success{NUL}"}), "outcome"),
    ("nul-path-erase-user", ("DELETE", "/api/v1/users/a%00b/memories", None), "user_id"),
    ("nul-path-erase-client", ("DELETE", "/api/v1/clients/a%00b/memories", None), "client_id"),
    ("nul-path-task", get("/api/v1/tasks/a%00b/"), "task_id"),
    ("nul-path-erasure", get("/api/v1/erasures/a%00b/"), "erasure_id"),
    ("nul-path-skill", get("/api/v1/skills/a%00b/"), "skill_id"),
    ("nul-path-profile", get("/api/v1/profiles/a%00b/"), "profile_id"),
    ("nul-path-delete-message", ("DELETE", "/api/v1/memory/message/a%00b", None), "item_id"),
    ("nul-path-delete-procedural", ("DELETE", "/api/v1/memory/procedural/a%00b", None), "item_id"),
    ("nul-path-delete-episodic", ("DELETE", "/api/v1/memory/episodic/a%00b", None), "item_id"),
    ("nul-path-delete-semantic", ("DELETE", "/api/v1/memory/semantic/a%00b", None), "item_id"),
    ("nul-sessions-list-user", get("/api/v1/sessions/?user_id=%00"), "user_id"),
    ("nul-skills-q", get("/api/v1/skills/?q=a%00"), "q"),
    ("nul-skills-user", get("/api/v1/skills/?user_id=a%00"), "user_id"),
    ("nul-experiences-q", get("/api/v1/experiences/?q=a%00"), "q"),
    ("nul-experiences-session", get("/api/v1/experiences/?session_id=a%00"), "session_id"),
    ("nul-profiles-user", get("/api/v1/profiles/?user_id=a%00"), "user_id"),
    ("nul-entities-user", get("/api/v1/entities/?user_id=a%00"), "user_id"),
    ("nul-context-user-id", post(CONTEXT, {"user_id": f"u{NUL}"}), "user_id"),
    ("nul-context-query", post(CONTEXT, {"user_id": "u1", "query": f"a{NUL}"}), "query"),
    (
        "nul-context-message",
        post(CONTEXT, {"user_id": "u1", "messages": [{"role": "user", "content": f"a{NUL}"}]}),
        "messages.0.content",
    ),
    ("nul-context-session-id", post(CONTEXT, {"user_id": "u1", "session_id": f"s{NUL}"}), "session_id"),
    ("nul-context-memory-types", post(CONTEXT, {"user_id": "u1", "memory_types": [f"message{NUL}"]}), "memory_types.0"),
    ("nul-memory-list-user", get("/api/v1/memory/semantic/?user_id=a%00"), "user_id"),
    ("nul-memory-list-q", get("/api/v1/memory/episodic/?user_id=u1&q=a%00"), "q"),
    ("nul-memory-list-subject", get("/api/v1/memory/semantic/?user_id=u1&subject=a%00"), "subject"),
    ("nul-memory-create-summary", post(SEMANTIC, fact(summary=f"a{NUL}")), "summary"),
    ("nul-memory-create-name", post(SEMANTIC, fact(name=f"a{NUL}")), "name"),
    ("nul-memory-create-actor", post(EPISODIC, event(actor=f"a{NUL}")), "actor"),
    ("nul-path-memory-get", get("/api/v1/memory/semantic/a%00b"), "item_id"),
    ("nul-path-memory-patch", ("PATCH", "/api/v1/memory/episodic/a%00b", {"summary": "x"}), "item_id"),
    ("nul-path-memory-history", get("/api/v1/memory/episodic/a%00b/history"), "item_id"),
    ("nul-path-session-delete", ("DELETE", "/api/v1/sessions/a%00b/?user_id=u1", None), "session_id"),
    ("nul-path-session-delete-user", ("DELETE", "/api/v1/sessions/s1/?user_id=u%001", None), "user_id"),
    ("nul-path-experience-delete", ("DELETE", "/api/v1/experiences/a%00b/", None), "experience_id"),
    ("nul-path-profile-delete", ("DELETE", "/api/v1/profiles/a%00b/", None), "profile_id"),
    ("nul-path-profile-findings", get("/api/v1/profiles/a%00b/findings"), "profile_id"),
    ("nul-path-profile-lint", ("POST", "/api/v1/profiles/a%00b/lint", None), "profile_id"),
    ("nul-topics-compile-user", post(TOPICS, {"user_id": f"u{NUL}"}), "user_id"),
    ("surrogate-topics-compile-user", post(TOPICS, {"user_id": SURROGATE}), "user_id"),
    ("nul-path-webhook", get("/api/v1/webhooks/a%00b/"), "webhook_id"),
    ("nul-path-webhook-deliveries", get("/api/v1/webhooks/a%00b/deliveries"), "webhook_id"),
    ("nul-path-webhook-test", ("POST", "/api/v1/webhooks/a%00b/test", None), "webhook_id"),
    ("nul-webhooks-active", get("/api/v1/webhooks/?active=%00"), "active"),
    ("nul-webhook-url", post(WEBHOOKS, {"url": f"https://a.example.com/{NUL}", "events": ["skill.evolved"]}), "url"),
    (
        "nul-webhook-event",
        post(WEBHOOKS, {"url": "https://a.example.com/", "events": [f"skill.evolved{NUL}"]}),
        "events",
    ),
    (
        "surrogate-webhook-description",
        post(WEBHOOKS, {"url": "https://a.example.com/", "events": ["skill.evolved"], "description": SURROGATE}),
        "description",
    ),
    ("nan-webhook-events", ("POST", "/api/v1/webhooks/", '{"url": "https://a.example.com/", "events": NaN}'), "NaN"),
    ("list-topics-compile-body", post(TOPICS, ["u1"]), "expected a dictionary"),
    ("number-topics-compile-user", post(TOPICS, {"user_id": 5}), "user_id"),
    ("unknown-topics-compile-field", post(TOPICS, {"scope": "other"}), "scope"),
    ("nul-path-entity-delete", ("DELETE", "/api/v1/entities/a%00b/", None), "entity_id"),
    ("nul-checkpoint-thread", post(CHECKPOINTS, checkpoint(thread_id=f"t{NUL}")), "thread_id"),
    ("surrogate-checkpoint-metadata-key", post(CHECKPOINTS, checkpoint(metadata={SURROGATE: 1})), "metadata"),
    ("deep-checkpoint-metadata", post(CHECKPOINTS, checkpoint(metadata={"a": nested(200, "dict")})), "metadata"),
    ("list-checkpoint-metadata", post(CHECKPOINTS, checkpoint(metadata=[1])), "metadata"),
    ("not-base64-checkpoint", post(CHECKPOINTS, checkpoint(checkpoint={"type": "json", "data": "{}"})), "data"),
    ("nan-checkpoint-metadata", ("POST", "/api/v1/checkpoints/", '{"user_id": "u1", "metadata": NaN}'), "NaN"),
    ("empty-checkpoint-writes", post(CHECKPOINT_WRITES, writes_body(writes=[])), "writes"),
    ("nul-checkpoint-write-channel", post(CHECKPOINT_WRITES, writes_body(channel=f"c{NUL}")), "writes.0.channel"),
    ("string-checkpoint-write-idx", post(CHECKPOINT_WRITES, writes_body(idx="1")), "writes.0.idx"),
    ("nul-checkpoint-list-thread", get("/api/v1/checkpoints/?user_id=u1&thread_id=a%00"), "thread_id"),
    ("not-object-checkpoint-list-metadata", get("/api/v1/checkpoints/?user_id=u1&metadata=0"), "metadata"),
    ("missing-checkpoint-delete-thread", ("DELETE", "/api/v1/checkpoints/?user_id=u1", None), "thread_id"),
    # --- lone surrogates ------------------------------------------------------------------------------
    ("surrogate-content", post(ADD, message(content=f"a{SURROGATE}")), "messages.0.content: Must not contain unpaired"),
    ("surrogate-low-content", post(ADD, message(content="a\udc00")), "messages.0.content"),
    (
        "surrogate-content-part",
        post(ADD, message(content=[{"type": "text", "text": SURROGATE}])),
        "messages.0.content.0.text",
    ),
    ("surrogate-metadata-value", post(ADD, message(metadata={"k": SURROGATE})), "messages.0.metadata.k"),
    ("surrogate-metadata-key", post(ADD, message(metadata={SURROGATE: 1})), "messages.0.metadata: A key"),
    ("surrogate-metadata-deep", post(ADD, message(metadata={"a": [{"b": SURROGATE}]})), "messages.0.metadata.a.0.b"),
    (
        "surrogate-tool-arguments",
        post(ADD, tool_call(arguments=f'{{"q": "{SURROGATE}"}}')),
        "messages.0.tool_calls.0.function.arguments",
    ),
    (
        "surrogate-tool-arguments-object",
        post(ADD, tool_call(arguments={"q": SURROGATE})),
        "messages.0.tool_calls.0.function.arguments.q",
    ),
    ("surrogate-name", post(ADD, message(name=SURROGATE)), "messages.0.name"),
    ("surrogate-filter-tags", post(ADD, add_body(filter_tags={"t": SURROGATE})), "filter_tags.t"),
    ("surrogate-user-id", post(ADD, add_body(user_id=SURROGATE)), "user_id"),
    ("surrogate-unknown-field-name", post(ADD, add_body(**{SURROGATE: 1})), "A key must not contain unpaired"),
    ("surrogate-unknown-message-field", post(ADD, message(**{SURROGATE: 1})), "messages.0: A key"),
    ("surrogate-outcome", post(ADD, add_body(outcome=SURROGATE)), "outcome"),
    ("surrogate-session-tag", post(ADD, add_body(session_tag=SURROGATE)), "session_tag"),
    ("surrogate-search-method", post(SEARCH, search_body(search_method=SURROGATE)), "search_method"),
    ("surrogate-search-query", post(SEARCH, search_body(query=SURROGATE)), "query"),
    ("surrogate-search-filter-tags", post(SEARCH, search_body(filter_tags={"a": SURROGATE})), "filter_tags.a"),
    ("surrogate-search-memory-types", post(SEARCH, search_body(memory_types=[SURROGATE])), "memory_types.0"),
    (
        "surrogate-get-search-filter-tags",
        get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%22%3A%22%5Cud800%22%7D"),
        "filter_tags",
    ),
    ("surrogate-retrieve-task", post(RETRIEVE, {"task": SURROGATE}), "task"),
    ("surrogate-feedback-reason", post(FEEDBACK, feedback(reason=SURROGATE)), "reason"),
    ("surrogate-context-query", post(CONTEXT, {"user_id": "u1", "query": SURROGATE}), "query"),
    (
        "surrogate-context-message",
        post(CONTEXT, {"user_id": "u1", "messages": [{"role": "user", "content": SURROGATE}]}),
        "messages.0.content",
    ),
    ("surrogate-memory-create-name", post(SEMANTIC, fact(name=SURROGATE)), "name"),
    ("surrogate-memory-create-details", post(EPISODIC, event(details=SURROGATE)), "details"),
    ("surrogate-patch-outcome", ("PATCH", "/api/v1/sessions/s1/?user_id=u1", {"outcome": SURROGATE}), "outcome"),
    ("invalid-utf8-body", ("POST", "/api/v1/memory/add", b'{"user_id": "\xed\xa0\x80"}'), "not valid utf-8"),
    # --- deep nesting -------------------------------------------------------------------------------
    ("deep-metadata-1000", post(ADD, message(metadata=nested(1000, container="dict"))), "nested deeper than 32"),
    ("deep-metadata-10000", post(ADD, message(metadata=nested(10000, container="dict"))), "nested deeper than 32"),
    ("deep-metadata-33", post(ADD, message(metadata=nested(30, container="dict"))), "nested deeper than 32"),
    ("deep-content-list-10000", post(ADD, message(content=nested(10000))), "nested deeper than 32"),
    ("deep-content-list-1000", post(ADD, message(content=[nested(1000)])), "nested deeper than 32"),
    ("deep-filter-tags-add", post(ADD, add_body(filter_tags=nested(1000, container="dict"))), "nested deeper than 32"),
    (
        "deep-filter-tags-search",
        post(SEARCH, search_body(filter_tags=nested(5000, container="dict"))),
        "nested deeper than 32",
    ),
    (
        "deep-filter-tags-get-search",
        get("/api/v1/memory/search?user_id=u1&filter_tags=" + "%7B%22a%22%3A" * 2000 + "1" + "%7D" * 2000),
        "nested deeper than 32",
    ),
    (
        "deep-filter-tags-get-search-33",
        get("/api/v1/memory/search?user_id=u1&filter_tags=" + "%7B%22a%22%3A" * 33 + "1" + "%7D" * 33),
        "nested deeper than 32",
    ),
    ("deep-retrieve-extra-field", post(RETRIEVE, {"task": "x", "extra": nested(10000)}), "nested deeper than 32"),
    ("deep-retrieve-task", post(RETRIEVE, {"task": nested(3000)}), "nested deeper than 32"),
    ("deep-feedback-reason", post(FEEDBACK, feedback(reason=nested(3000))), "nested deeper than 32"),
    ("deep-tool-arguments", post(ADD, tool_call(arguments=nested(2000, container="dict"))), "nested deeper than 32"),
    ("deep-raw-unclosed", ("POST", "/api/v1/memory/add", "[" * 100000), "nested deeper than 32"),
    ("deep-patch", ("PATCH", "/api/v1/sessions/s1/?user_id=u1", {"outcome": nested(5000)}), "nested deeper than 32"),
    (
        "deep-context-messages",
        post(CONTEXT, {"user_id": "u1", "messages": [{"role": "user", "content": nested(3000)}]}),
        "nested deeper than 32",
    ),
    ("deep-memory-create", post(SEMANTIC, fact(details=nested(3000, container="dict"))), "nested deeper than 32"),
    # --- numbers ------------------------------------------------------------------------------------
    ("offset-10e20-session", get("/api/v1/sessions/s1/?user_id=u1&offset=100000000000000000000"), "offset"),
    ("limit-10e20-session", get("/api/v1/sessions/s1/?user_id=u1&limit=100000000000000000000"), "limit"),
    ("offset-negative-session", get("/api/v1/sessions/s1/?user_id=u1&offset=-1"), "offset"),
    ("offset-10e20-list", get("/api/v1/sessions/?offset=100000000000000000000"), "offset"),
    ("page-10e20-list", get("/api/v1/skills/?page=100000000000000000000"), "page"),
    ("limit-text-list", get("/api/v1/experiences/?limit=ten"), "limit"),
    ("limit-float-search", get("/api/v1/memory/search?user_id=u1&limit=1.5"), "limit"),
    ("nan-filter-tags-get", get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%22%3ANaN%7D"), "filter_tags"),
    (
        "infinity-filter-tags-get",
        get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%22%3AInfinity%7D"),
        "filter_tags",
    ),
    (
        "minus-infinity-filter-tags-get",
        get("/api/v1/memory/search_all_users?filter_tags=%7B%22a%22%3A-Infinity%7D"),
        "filter_tags",
    ),
    (
        "overflow-float-filter-tags-get",
        get("/api/v1/memory/search?user_id=u1&filter_tags=%7B%22a%22%3A1e400%7D"),
        "filter_tags",
    ),
    (
        "nan-metadata-body",
        (
            "POST",
            "/api/v1/memory/add",
            '{"user_id":"u1","session_id":"s2","messages":[{"role":"user","content":"x","metadata":{"a":NaN}}]}',
        ),
        "NaN",
    ),
    (
        "infinity-filter-tags-body",
        (
            "POST",
            "/api/v1/memory/add",
            '{"user_id":"u1","session_id":"s2","messages":[{"role":"user","content":"x"}],'
            '"filter_tags":{"a":Infinity}}',
        ),
        "Infinity",
    ),
    (
        "overflow-float-metadata-body",
        (
            "POST",
            "/api/v1/memory/add",
            '{"user_id":"u1","session_id":"s2","messages":[{"role":"user","content":"x","metadata":{"a":1e999}}]}',
        ),
        "out of range",
    ),
    (
        "huge-integer-metadata-body",
        (
            "POST",
            "/api/v1/memory/add",
            '{"user_id":"u1","session_id":"s2","messages":[{"role":"user","content":"x",'
            '"metadata":{"a":' + "9" * 5000 + "}}]}",
        ),
        "JSON",
    ),
    ("nan-search-limit", ("POST", "/api/v1/memory/search", '{"user_id":"u1","query":"x","limit":NaN}'), "NaN"),
    ("k-10e20-retrieve", post(RETRIEVE, {"task": "x", "k": 10**20}), "k"),
    ("nan-context-max-tokens", ("POST", "/api/v1/memory/context", '{"user_id":"u1","max_tokens":NaN}'), "NaN"),
    (
        "infinity-context-max-tokens",
        ("POST", "/api/v1/memory/context", '{"user_id":"u1","max_tokens":Infinity}'),
        "Infinity",
    ),
    ("max-tokens-10e20-context", post(CONTEXT, {"user_id": "u1", "max_tokens": 10**20}), "max_tokens"),
    ("max-tokens-string-context", post(CONTEXT, {"user_id": "u1", "max_tokens": "500"}), "max_tokens"),
    ("nul-consolidate-user", post(CONSOLIDATE, {"user_id": f"u{NUL}"}), "user_id"),
    ("surrogate-consolidate-user", post(CONSOLIDATE, {"user_id": SURROGATE}), "user_id"),
    ("deep-consolidate-user", post(CONSOLIDATE, {"user_id": "@@deep:40:dict@@"}), "nested deeper than 32"),
    ("dry-run-string-consolidate", post(CONSOLIDATE, {"dry_run": "yes"}), "dry_run"),
    ("user-number-consolidate", post(CONSOLIDATE, {"user_id": 5}), "user_id"),
    ("offset-10e20-memory-list", get("/api/v1/memory/semantic/?user_id=u1&offset=100000000000000000000"), "offset"),
    ("limit-zero-memory-list", get("/api/v1/memory/episodic/?user_id=u1&limit=0"), "limit"),
    ("k-string-retrieve", post(RETRIEVE, {"task": "x", "k": "5"}), "k: Must be an integer"),
    ("k-float-retrieve", post(RETRIEVE, {"task": "x", "k": 2.5}), "k"),
    ("k-boolean-retrieve", post(RETRIEVE, {"task": "x", "k": True}), "k"),
    ("limit-10e20-search-body", post(SEARCH, search_body(limit=10**20)), "limit"),
    ("role-list", post(ADD, add_body(messages=[{"role": [], "content": "x"}])), "messages.0.role"),
    ("role-object", post(ADD, add_body(messages=[{"role": {}, "content": "x"}])), "messages.0.role"),
    ("role-number", post(ADD, add_body(messages=[{"role": 5, "content": "x"}])), "messages.0.role"),
    ("seal-yes", post(ADD, add_body(seal="yes")), "seal"),
    ("seal-one", post(ADD, add_body(seal=1)), "seal"),
    ("seal-string-true", post(ADD, add_body(seal="true")), "seal"),
    ("user-id-number", post(ADD, add_body(user_id=5)), "user_id: Must be a string"),
    ("user-id-too-long", post(ADD, add_body(user_id="u" * 256)), "user_id"),
    ("session-id-newline", post(ADD, add_body(session_id="s\n2")), "session_id"),
    ("query-number-search", post(SEARCH, search_body(query=5)), "query"),
    ("memory-types-string-body", post(SEARCH, search_body(memory_types="message")), "memory_types"),
    ("filter-tags-list", post(ADD, add_body(filter_tags=["a"])), "filter_tags"),
    ("filter-tags-nested-value", post(ADD, add_body(filter_tags={"team": {"a": 1}})), "filter_tags.team: Tag values"),
    ("filter-tags-list-value-search", post(SEARCH, search_body(filter_tags={"team": ["a"]})), "filter_tags.team"),
    ("empty-required-query-user-id", get("/api/v1/sessions/s1/?user_id="), "user_id"),
    ("empty-optional-query-q", get("/api/v1/skills/?q="), "q"),
    ("empty-optional-query-start", get("/api/v1/memory/search_all_users?start="), "start"),
    ("content-object", post(ADD, message(content={"text": "x"})), "messages.0.content"),
    (
        "tool-calls-object",
        post(ADD, add_body(messages=[{"role": "assistant", "tool_calls": {"id": "c"}}])),
        "messages.0.tool_calls",
    ),
    (
        "function-call-string",
        post(ADD, add_body(messages=[{"role": "assistant", "function_call": "f()"}])),
        "messages.0.function_call",
    ),
    # --- dates --------------------------------------------------------------------------------------
    ("date-offset-25h", post(ADD, message(occurred_at="2024-01-01T00:00:00+25:00")), "messages.0.occurred_at"),
    ("date-offset-99-99", post(ADD, message(occurred_at="2024-01-01T00:00:00+99:99")), "messages.0.occurred_at"),
    ("date-offset-24h", post(ADD, message(occurred_at="2024-01-01T00:00:00-24:00")), "messages.0.occurred_at"),
    ("date-month-13", post(ADD, message(occurred_at="2024-13-01T00:00:00Z")), "messages.0.occurred_at"),
    ("date-feb-30", post(ADD, message(occurred_at="2024-02-30T00:00:00Z")), "messages.0.occurred_at"),
    ("date-feb-29-non-leap", post(ADD, message(occurred_at="2023-02-29T00:00:00Z")), "messages.0.occurred_at"),
    ("date-hour-24", post(ADD, message(occurred_at="2024-01-01T24:00:00Z")), "messages.0.occurred_at"),
    ("date-year-0000", post(ADD, message(occurred_at="0000-01-01T00:00:00Z")), "messages.0.occurred_at"),
    ("date-year-0001-plus-5", post(ADD, message(occurred_at="0001-01-01T00:00:00+05:00")), "years 1900 to 2199"),
    ("date-year-9999-minus-5", post(ADD, message(occurred_at="9999-12-31T23:59:59-05:00")), "years 1900 to 2199"),
    ("date-1899", post(ADD, message(occurred_at="1899-12-31T23:59:59Z")), "years 1900 to 2199"),
    ("date-2200", post(ADD, message(occurred_at="2200-01-01T00:00:00Z")), "years 1900 to 2199"),
    ("date-number", post(ADD, message(occurred_at=1700000000)), "messages.0.occurred_at"),
    ("date-garbage", post(ADD, message(occurred_at="yesterday")), "messages.0.occurred_at"),
    ("date-top-level-year-0001", post(ADD, add_body(occurred_at="0001-01-01T00:00:00+05:00")), "occurred_at"),
    ("date-top-level-offset", post(ADD, add_body(occurred_at="2024-01-01T00:00:00+25:00")), "occurred_at"),
    ("date-top-level-month-13", post(ADD, add_body(occurred_at="2024-13-01T00:00:00Z")), "occurred_at"),
    ("date-search-start-9999", post(SEARCH, search_body(start="9999-12-31T23:59:59-05:00")), "start"),
    ("date-search-end-0001", post(SEARCH, search_body(end="0001-01-01T00:00:00+05:00")), "end"),
    ("date-get-search-start-month-13", get("/api/v1/memory/search?user_id=u1&start=2024-13-01T00:00:00Z"), "start"),
    ("date-search-all-users-end-offset", get("/api/v1/memory/search_all_users?end=2024-01-01T00:00:00%2B25:00"), "end"),
    ("date-sessions-start-0001", get("/api/v1/sessions/?start=0001-01-01T00:00:00%2B05:00"), "start"),
    ("date-sessions-end-hour-24", get("/api/v1/sessions/?end=2024-01-01T24:00:00Z"), "end"),
    ("date-memory-create-9999", post(EPISODIC, event(occurred_at="9999-12-31T23:59:59-05:00")), "occurred_at"),
    ("date-memory-create-feb-30", post(EPISODIC, event(occurred_at="2024-02-30T00:00:00Z")), "occurred_at"),
    ("date-memory-list-start-month-13", get("/api/v1/memory/episodic/?user_id=u1&start=2024-13-01T00:00:00Z"), "start"),
    (
        "role-context-number",
        post(CONTEXT, {"user_id": "u1", "messages": [{"role": 5, "content": "x"}]}),
        "messages.0.role",
    ),
]


@pytest.fixture
def hostile_api(db, add_messages):
    """A client that may do everything (erasure too), with one session `s1` of user `u1` already stored."""
    client = ClientFactory(can_erase=True, can_manage_webhooks=True)
    add_messages(client, user_id="u1", session_id="s1")
    return api_for(client)


def stored_state():
    session = Session.objects.get(session_id="s1")
    return {
        "sessions": Session.objects.count(),
        "messages": Message.objects.count(),
        "users": EndUser.objects.count(),
        "tasks": MemoryTask.objects.count(),
        "idempotency": IngestRequest.objects.count(),
        "memories": (SemanticMemory.objects.count(), EpisodicMemory.objects.count()),
        "s1": (session.status, session.outcome, session.message_count, session.updated_at),
    }


def send(api, method, path, body, **headers):
    if body is None:
        return api.generic(method, path, **headers)
    if isinstance(body, (str, bytes)):
        return api.generic(method, path, body, content_type="application/json", **headers)
    # ensure_ascii (the default) writes NUL and surrogates as \u escapes, as a real client would.
    return api.generic(
        method, path, DEEP.sub(nested_text, json.dumps(body)), content_type="application/json", **headers
    )


@pytest.mark.parametrize("request_spec,expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_hostile_input_is_a_4xx_naming_the_problem_and_stores_nothing(hostile_api, request_spec, expected):
    method, path, body = request_spec
    before = stored_state()
    response = send(hostile_api, method, path, body)
    assert 400 <= response.status_code < 500, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["status"] == response.status_code and isinstance(error["code"], str)
    assert expected.lower() in error["message"].lower(), error["message"][:500]
    assert stored_state() == before


def test_every_family_of_the_issue_has_cases():
    families = {case[0].split("-")[0] for case in CASES}
    assert {"nul", "surrogate", "deep", "offset", "nan", "infinity", "role", "date"} <= families
    assert len(CASES) == len({case[0] for case in CASES})


def test_an_idempotency_key_with_a_nul_is_refused(hostile_api):
    before = stored_state()
    response = send(hostile_api, "POST", "/api/v1/memory/add", add_body(), HTTP_IDEMPOTENCY_KEY="key\x00")
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert stored_state() == before


def test_json_exactly_at_the_depth_limit_is_accepted(hostile_api, settings):
    # The body is level 1, messages 2, the message 3: metadata and 28 levels inside it reach 32.
    body = message(metadata=nested(29, container="dict"))
    response = send(hostile_api, "POST", "/api/v1/memory/add", body)
    assert response.status_code == 202, response.content
    settings.JSON_MAX_DEPTH = 31
    response = send(hostile_api, "POST", "/api/v1/memory/add", {**body, "session_id": "s3"})
    assert response.status_code == 400 and "nested deeper than 31" in response.json()["error"]["message"]


def test_paired_surrogates_that_is_astral_characters_are_accepted(hostile_api):
    response = send(hostile_api, "POST", "/api/v1/memory/add", message(content="emoji \U0001f600 and 𝄞"))
    assert response.status_code == 202
    stored = Message.objects.get(session__session_id="s2")
    assert stored.content == "emoji \U0001f600 and 𝄞"
