"""Chunked request bodies through the real WSGI stack, and booleans that must be booleans."""

import http.client
import io
import json

import pytest
from django.conf import settings

from apps.conversations.models import Message, Session
from harness.processes import web_on_private_redis
from memory_platform.wsgi import application

ADD = {
    "user_id": "u-chunked",
    "session_id": "s-chunked",
    "messages": [{"role": "user", "content": "I moved to Lisbon in May."}],
}


def chunked(payload: bytes, size: int = 7) -> bytes:
    pieces = [payload[i : i + size] for i in range(0, len(payload), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def post_chunked(port: int, api_key: str, payload: bytes) -> tuple[int, dict]:
    connection_ = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection_.putrequest("POST", "/api/v1/memory/add")
        connection_.putheader("Authorization", f"Api-Key {api_key}")
        connection_.putheader("Content-Type", "application/json")
        connection_.putheader("Transfer-Encoding", "chunked")
        connection_.endheaders()
        connection_.send(chunked(payload))
        response = connection_.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection_.close()


@pytest.fixture
def web(transactional_db, tmp_path):
    with web_on_private_redis(
        tmp_path / "web.log",
        workers=1,
        threads=2,
        env={"LOG_LEVEL": "ERROR", "DATA_UPLOAD_MAX_MEMORY_SIZE": "4096"},
    ) as (server, _):
        yield server


def test_gunicorn_reads_a_chunked_body_as_the_body(web, client_a):
    status, body = post_chunked(web.port, client_a.raw_key, json.dumps(ADD).encode())

    assert status == 202, body
    assert body["messages_stored"] == 1
    session = Session.objects.get(session_id="s-chunked")
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == [
        "I moved to Lisbon in May."
    ]


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(web, client_a):
    huge = dict(ADD, messages=[{"role": "user", "content": "x" * 5000}])

    status, body = post_chunked(web.port, client_a.raw_key, json.dumps(huge).encode())

    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert not Session.objects.filter(session_id="s-chunked").exists()


def test_a_server_that_cannot_end_a_chunked_body_gets_411(db):
    """runserver (wsgiref) does not de-chunk: without wsgi.input_terminated the body cannot be read."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/memory/add",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "wsgi.url_scheme": "http",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(chunked(json.dumps(ADD).encode())),
        "wsgi.errors": io.StringIO(),
    }
    started = {}

    def start_response(status, headers):
        started.update(status=status, headers=dict(headers))

    body = json.loads(b"".join(application(environ, start_response)))

    assert started["status"] == "411 Length Required"
    assert body["error"]["code"] == "length_required"
    assert "Content-Length" in body["error"]["message"]
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE > 0


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "1", [], {}])
def test_seal_must_be_a_json_boolean(api, value):
    response = api.post("/api/v1/memory/add", dict(ADD, seal=value), format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"]["seal"] == ["Must be a JSON boolean, true or false."]
    assert not Session.objects.filter(session_id="s-chunked").exists()


def test_seal_true_still_seals(api):
    response = api.post("/api/v1/memory/add", dict(ADD, seal=True), format="json")

    assert response.status_code == 202
    assert Session.objects.get(session_id="s-chunked").sealed_at is not None
