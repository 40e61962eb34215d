"""/mcp authenticates exactly as the REST API does, before the MCP transport sees a byte."""

import uuid

import httpx2 as httpx
import pytest
from mcp.shared.exceptions import MCPError

from apps.tenancy.services import api_key_revoke, client_set_status
from harness.processes import wait_for
from tests.factories import ClientFactory
from tests.mcp_server.mcp_client import call, http_transport, run, text

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def post(mcp_server, headers, url=None):
    return httpx.post(url or mcp_server.url, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=10)


@pytest.mark.parametrize(
    ("headers", "code", "message"),
    [
        (
            {},
            "not_authenticated",
            "An API key or an OAuth access token is required: send 'Authorization: Api-Key <key>' or "
            "'Authorization: Bearer <token>'.",
        ),
        ({"Authorization": "Api-Key mp_abcdefgh_wrong"}, "authentication_failed", "Invalid or revoked API key."),
        ({"X-API-Key": "not-a-key"}, "authentication_failed", "Invalid or revoked API key."),
        (
            {"Authorization": "Basic abc"},
            "authentication_failed",
            "Authorization header must be 'Api-Key <key>' or 'Bearer <OAuth access token>'.",
        ),
    ],
)
def test_no_key_or_a_bad_key_gets_401_with_the_platform_error(mcp_server, headers, code, message):
    """Both challenges: Bearer points OAuth-capable hosts at the resource metadata (MCP authorization)."""
    response = post(mcp_server, headers)

    assert response.status_code == 401
    metadata = f"http://127.0.0.1:{mcp_server.port}/.well-known/oauth-protected-resource/mcp"
    assert response.headers.get_list("WWW-Authenticate") == [
        f'Bearer resource_metadata="{metadata}", scope="mcp"',
        "Api-Key",
    ]
    assert response.json() == {"error": {"status": 401, "code": code, "message": message}}


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        ("Bearer abc", "The access token is invalid, expired or revoked."),
        ("Bearer", "Authorization header must be 'Bearer <token>' with a token."),
    ],
)
def test_a_bad_bearer_token_gets_401_with_invalid_token(mcp_server, authorization, message):
    response = post(mcp_server, {"Authorization": authorization})

    assert response.status_code == 401
    metadata = f"http://127.0.0.1:{mcp_server.port}/.well-known/oauth-protected-resource/mcp"
    assert response.headers["WWW-Authenticate"] == (
        f'Bearer error="invalid_token", error_description="{message}", resource_metadata="{metadata}"'
    )
    assert response.json() == {"error": {"status": 401, "code": "authentication_failed", "message": message}}


def test_revoked_keys_and_disabled_clients_get_401(mcp_server, client_a):
    revoked = ClientFactory(organization=client_a.organization)
    api_key_revoke(prefix=revoked.raw_key.split("_")[1])
    disabled = ClientFactory(organization=client_a.organization)
    client_set_status(client=disabled, status="disabled")

    assert post(mcp_server, {"Authorization": f"Api-Key {revoked.raw_key}"}).json()["error"]["message"] == (
        "Invalid or revoked API key."
    )
    assert post(mcp_server, {"X-API-Key": disabled.raw_key}).json()["error"]["message"] == "This client is disabled."


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_methods_other_than_post_answer_405_at_once(mcp_server, client_a, method):
    """Issue 39: GET with a valid key opened an event stream that never carried a byte; the stateless
    server has no such stream, nor a session to DELETE."""
    headers = {"Accept": "text/event-stream, application/json", "Authorization": f"Api-Key {client_a.raw_key}"}

    response = httpx.request(method, mcp_server.url, headers=headers, timeout=5)

    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.json() == {
        "error": {
            "status": 405,
            "code": "method_not_allowed",
            "message": f"{method} is not allowed on /mcp: this stateless server offers no event stream (GET) "
            "and no session to end (DELETE); send each JSON-RPC message with POST.",
        }
    }


def test_a_get_without_a_key_is_refused_like_a_post(mcp_server):
    response = httpx.get(mcp_server.url, headers={"Accept": "text/event-stream"}, timeout=5)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def test_the_sdk_client_cannot_open_a_session_without_a_valid_key(mcp_server, client_a):
    async def scenario(session):
        return (await session.list_tools()).tools

    with pytest.raises(BaseException) as raised:
        run(http_transport(mcp_server.url, {"Authorization": "Api-Key mp_abcdefgh_wrong"}), scenario)
    tools = run(http_transport(mcp_server.url, {"Authorization": f"Api-Key {client_a.raw_key}"}), scenario)

    assert [type(leaf) for leaf in _leaves(raised.value)] == [MCPError]
    assert (
        len(tools) == 18
    )  # issue 17's seven, the agent's API's eight (29), consolidate_memories (32), two skill tools (30)


def test_x_api_key_header_works_and_the_key_picks_the_tenant(mcp_server, client_a, add_messages):
    add_messages(client_a, user_id="alice", session_id="chat-1")

    result = call(http_transport(mcp_server.url, {"X-API-Key": client_a.raw_key}), "list_sessions")

    assert not result.is_error
    assert [session["session_id"] for session in result.structured_content["results"]] == ["chat-1"]
    assert "1 session(s); showing 1–1:" in text(result)


def test_the_host_header_is_checked_against_allowed_hosts(mcp_server, client_a):
    response = post(mcp_server, {"Authorization": f"Api-Key {client_a.raw_key}", "Host": "attacker.example"})

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Invalid Host header."


def test_healthz_answers_without_a_key(mcp_server):
    response = httpx.get(mcp_server.url.removesuffix("/mcp") + "/healthz", timeout=10)

    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_a_client_over_its_rate_limit_gets_429_with_retry_after(mcp_server, client_a):
    greedy = ClientFactory(organization=client_a.organization, requests_per_minute=2)
    headers = {"Authorization": f"Api-Key {greedy.raw_key}"}

    statuses = [post(mcp_server, headers).status_code for _ in range(2)]
    refused = post(mcp_server, headers)

    assert statuses == [200, 200]
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    assert error["details"]["limit"] == "2/minute"
    assert refused.headers["Retry-After"] == str(error["details"]["retry_after_seconds"])
    assert post(mcp_server, {"Authorization": f"Api-Key {client_a.raw_key}"}).status_code == 200


def test_the_access_log_names_the_route_never_the_query_string(mcp_server, client_a):
    marker = f"mp_secret_{uuid.uuid4().hex}"
    start = len(mcp_server.log_path.read_text())

    response = post(
        mcp_server, {"Authorization": f"Api-Key {client_a.raw_key}"}, url=f"{mcp_server.url}?api_key={marker}"
    )
    httpx.get(mcp_server.url.removesuffix("/mcp") + f"/{marker}", timeout=10)

    assert response.status_code == 200

    def logged():
        text = mcp_server.log_path.read_text()[start:]
        return text if '"GET (no route) HTTP/1.1" 404' in text else None

    log = wait_for(logged, timeout=10, message="the access log lines")
    assert marker not in log
    assert '"POST /mcp HTTP/1.1" 200' in log
