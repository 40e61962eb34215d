"""The OpenAPI schema lists every field a client gets (issue 28): each documented read is called with
its example request, the ids in its path being those of stored items, and no object in a response
holds a key its schema does not name. A search result is documented per `memory_type`."""

import re
from urllib.parse import urlsplit

import pytest
from django.test import Client

from apps.search.registry import SOURCES
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.search.makers import MAKERS

TEXT = "Ana lives in Lisbon, where does Ana live"
READS_BY_POST = ("/api/v1/memory/search", "/api/v1/memory/context", "/api/v1/skills/retrieve", "/api/v1/memory/add")


@pytest.fixture(scope="module")
def schema():
    return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def undocumented(schema: dict, value, node: dict, path: str = "") -> list[str]:
    """The keys of `value`, at any depth, that `node` does not name."""
    node = resolve(schema, node)
    members = node.get("oneOf") or node.get("anyOf")
    if members:
        discriminator = node.get("discriminator")
        if discriminator and isinstance(value, dict):
            return undocumented(
                schema, value, {"$ref": discriminator["mapping"][value[discriminator["propertyName"]]]}, path
            )
        found = [undocumented(schema, value, member, path) for member in members]
        return min(found, key=len)
    if isinstance(value, dict):
        properties, extra = node.get("properties"), node.get("additionalProperties")
        if properties is None:
            return (
                [] if extra in (None, True) else sum((undocumented(schema, v, extra, path) for v in value.values()), [])
            )
        missing = []
        for key, item in value.items():
            if key in properties:
                missing += undocumented(schema, item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                missing += undocumented(schema, item, extra, f"{path}.{key}")
            elif extra is not True:
                missing.append(f"{path}.{key}")
        return missing
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return sum((undocumented(schema, item, node["items"], f"{path}[]") for item in value), [])
    return []


def response_schema(operation: dict, status: int) -> dict | None:
    response = operation["responses"].get(str(status))
    content = (response or {}).get("content", {}).get("application/json")
    return content["schema"] if content else None


@pytest.fixture
def stored(add_messages):
    """One item of every kind, for alice, and the ids a documented read names."""
    client = ClientFactory(can_export=True, can_erase=True, can_manage_webhooks=True)
    added = add_messages(
        client, user_id="alice", session_id="chat-2024-06-01", messages=[{"role": "user", "content": "Hello, Ana."}]
    )
    items = {memory_type: make(client, "alice", TEXT, add_messages) for memory_type, make in MAKERS.items()}
    api = api_for(client)
    export = api.post("/api/v1/exports", {"user_id": "alice"}, format="json").json()
    add_messages(client, user_id="bob", session_id="b1")
    erasure = api.delete("/api/v1/users/bob/memories").json()
    hook = {"url": "https://hooks.example.com/x", "events": ["export.ready"]}
    webhook = api.post("/api/v1/webhooks/", hook, format="json").json()
    api.post(f"/api/v1/webhooks/{webhook['id']}/test", format="json")
    ids = {
        "/api/v1/memory/semantic/{item_id}": items["semantic"].pk,
        "/api/v1/memory/episodic/{item_id}": items["episodic"].pk,
        "/api/v1/skills/{skill_id}/": items["procedural"].pk,
        "/api/v1/profiles/{profile_id}/": items["profile"].pk,
        "/api/v1/sessions/{session_id}/": "chat-2024-06-01",
        "/api/v1/tasks/{task_id}/": added["task_ids"][0],
        "/api/v1/exports/{export_id}": export["id"],
        "/api/v1/erasures/{erasure_id}/": erasure["erasure_id"],
        "/api/v1/webhooks/{webhook_id}/": webhook["id"],
    }
    return api, ids


def target_of(path: str, operation: dict, ids: dict) -> str | None:
    """The example request's target, its path ids replaced by those of stored items (None: none stored)."""
    example = operation["description"].split("Example request: `", 1)[1].split("`", 1)[0].split(" ", 1)[1]
    query = urlsplit(example).query
    for template, value in ids.items():
        if path.startswith(template.split("{", 1)[0]) and re.fullmatch(
            re.sub(r"\{[^}]+\}", "[^/]+", template) + ".*", path
        ):
            concrete = re.sub(r"\{[^}]+\}", str(value), path, count=1)
            return concrete + (f"?{query}" if query else "")
    return None if "{" in path else path + (f"?{query}" if query else "")


def checked_operations(schema, api, ids):
    """(method, path, undocumented keys) for each read whose example answered with JSON."""
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            if not path.startswith("/api/v1/") or not (method == "get" or path in READS_BY_POST):
                continue
            target = target_of(path, operation, ids)
            if target is None:
                continue
            if method == "get":
                response = api.get(target)
            else:
                body = next(iter(operation["requestBody"]["content"]["application/json"]["examples"].values()))["value"]
                response = api.post(target, body, format="json")
            documented = response_schema(operation, response.status_code)
            if response.status_code >= 300 or documented is None:
                continue
            yield method, path, undocumented(schema, response.json(), documented)


@pytest.mark.django_db
def test_every_read_answers_only_fields_its_schema_lists(schema, stored):
    api, ids = stored
    results = list(checked_operations(schema, api, ids))
    assert len(results) >= 20, results  # nearly every read; the rest answer files or need rows not made here
    assert [(method, path, keys) for method, path, keys in results if keys] == []


@pytest.mark.django_db
@pytest.mark.parametrize("memory_type", sorted(SOURCES))
def test_a_search_hit_carries_exactly_the_fields_of_its_memory_types_schema(
    schema, memory_type, client_a, add_messages
):
    MAKERS[memory_type](client_a, "alice", TEXT, add_messages)
    response = api_for(client_a).post(
        "/api/v1/memory/search",
        {"user_id": "alice", "query": TEXT, "memory_types": [memory_type], "search_method": "bm25"},
        format="json",
    )
    hit = response.json()["results"][0]
    union = schema["components"]["schemas"]["SearchResult"]
    documented = resolve(schema, {"$ref": union["discriminator"]["mapping"][memory_type]})
    assert hit["memory_type"] == memory_type
    assert set(hit) == set(documented["properties"]) == set(documented["required"])
    assert TEXT in hit["text"], "every hit's `text` shows what was stored, whatever the type"
