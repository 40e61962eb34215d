"""The API docs are grouped and explained (issue 27): every operation sits in one of the documented
groups, has a summary and an example request, and a body example the server accepts."""

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import api_for
from tests.factories import ClientFactory

GROUPS = ["memory", "sessions", "skills", "profiles", "privacy", "webhooks", "tasks", "account"]


@pytest.fixture(scope="module")
def schema():
    return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


def api_operations(schema):
    for path, methods in schema["paths"].items():
        if path.startswith("/api/v1/"):
            for method, operation in methods.items():
                yield path, method, operation


def test_groups_are_the_documented_ones_in_order(schema):
    assert (
        [tag["name"] for tag in schema["tags"]]
        == GROUPS
        == [tag["name"] for tag in settings.SPECTACULAR_SETTINGS["TAGS"]]
    )
    assert all(tag["description"] for tag in schema["tags"])


def test_every_operation_has_a_group_a_summary_and_an_example_request(schema):
    used = set()
    for path, method, operation in api_operations(schema):
        assert len(operation["tags"]) == 1 and operation["tags"][0] in GROUPS, (method, path)
        used.add(operation["tags"][0])
        assert operation.get("summary") and len(operation["summary"]) < 120, (method, path)
        assert f"Example request: `{method.upper()} /api/v1/" in operation["description"], (method, path)
        if "requestBody" in operation:
            assert operation["requestBody"]["content"]["application/json"]["examples"], (method, path)
    assert used == set(GROUPS)


@pytest.mark.django_db
def test_each_body_example_is_accepted_as_documented(schema):
    """The examples are real requests: sent as they stand, none is refused as invalid."""
    api = api_for(ClientFactory(can_export=True, can_manage_webhooks=True))
    api.post(
        "/api/v1/memory/add",
        {
            "user_id": "alice",
            "session_id": "book-flight-17",
            "session_tag": "task",
            "messages": [{"role": "user", "content": "Book me a flight."}],
        },
        format="json",
    )
    for path, method, operation in api_operations(schema):
        if "requestBody" not in operation:
            continue
        example = next(iter(operation["requestBody"]["content"]["application/json"]["examples"].values()))["value"]
        line = operation["description"].split("Example request: `", 1)[1].split("`", 1)[0]
        _, target = line.split(" ", 1)
        response = getattr(api, method)(target, example, format="json")
        # An example naming an item by id names none in the test database: not found, but not refused.
        assert response.status_code < 300 or (response.status_code == 404 and "{" in path), (
            method,
            path,
            response.content[:300],
        )
