"""apps/core/schema.py: the OpenAPI schema documents every error an operation can answer and the
input rules the server enforces (tests/test_openapi_fuzz.py checks it against a live server)."""

import pytest
from django.test import Client

from apps.core.validation import TEXT_PATTERN


@pytest.fixture(scope="module")
def schema():
    return Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()


def operations(schema):
    for path, methods in schema["paths"].items():
        if path.startswith("/api/v1/"):
            for method, operation in methods.items():
                yield path, method, operation


def test_every_operation_documents_its_errors_with_the_error_shape(schema):
    assert schema["openapi"] == "3.1.0"
    found = list(operations(schema))
    # issue 30: skills/<id>/uses and skills/<id>/feedback; issue 32: memory/consolidate, topics/compile, profiles/<id>/lint;
    # issue 40: the seven webhook operations; issue 53: checkpoints/ (list, put, delete thread) and checkpoints/writes
    assert len(found) == 61
    # The context names a session in its body: a session the client does not read is a 404 there too.
    # An export names its user or client in the body too, a consolidation and a topic compile their user.
    body_lookups = {"/api/v1/memory/context", "/api/v1/exports", "/api/v1/memory/consolidate", "/api/v1/topics/compile"}
    for path, method, operation in found:
        statuses = set(operation["responses"])
        assert {"400", "401"} <= statuses, (method, path)
        assert ("404" in statuses) == ("{" in path or path in body_lookups), (method, path)
        if "requestBody" in operation:
            assert {"411", "413", "415"} <= statuses, (method, path)
        for status in statuses - {"200", "201", "202", "204"}:
            content = operation["responses"][status]["content"]["application/json"]["schema"]
            assert content == {"$ref": "#/components/schemas/Error"}, (method, path, status)
    responses = schema["paths"]["/api/v1/memory/add"]["post"]["responses"]
    assert {"403", "409"} <= set(responses)
    assert "403" not in schema["paths"]["/api/v1/memory/search"]["post"]["responses"]  # searching reads


def test_request_schemas_state_the_rules(schema):
    components = schema["components"]["schemas"]
    for name, component in components.items():
        if name.endswith("Input"):
            assert component["additionalProperties"] is False, name
    add = components["MemoryAddInput"]["properties"]
    assert add["user_id"] == {"type": "string", "pattern": TEXT_PATTERN, "minLength": 1, "maxLength": 255}
    assert add["session_id"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert add["occurred_at"]["pattern"].startswith("^(19[0-9]{2}|2[01][0-9]{2})-")
    assert add["messages"]["maxItems"] == 500 and add["messages"]["minItems"] == 1
    message = add["messages"]["items"]
    assert message["required"] == ["role"] and message["additionalProperties"] is False
    assert add["filter_tags"]["additionalProperties"]["anyOf"][0] == {"type": "string", "pattern": TEXT_PATTERN}
    session_get = schema["paths"]["/api/v1/sessions/{session_id}/"]["get"]["parameters"]
    offset = next(parameter for parameter in session_get if parameter["name"] == "offset")
    assert offset["schema"]["maximum"] == 2**31 - 1
    search = schema["paths"]["/api/v1/memory/search"]["get"]["parameters"]
    filter_tags = next(parameter for parameter in search if parameter["name"] == "filter_tags")
    assert "application/json" in filter_tags["content"]  # JSON text, not form-style key=value pairs
