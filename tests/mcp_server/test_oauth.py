"""OAuth 2.1 for /mcp, end to end: `manage.py runmcp` as the protected resource, the live web server
as the authorization server, the MCP SDK's OAuth provider as the host, and a staff member (played by
the test over HTTP) who approves the host for one platform client."""

import anyio
import httpx2 as httpx
import pytest
from oauth2_provider.models import AccessToken, Application

from apps.conversations.models import Session
from apps.oauth.models import ApplicationBinding
from apps.oauth.services import client_oauth_revoke
from apps.tenancy.services import client_set_status
from tests.admin.makers import staff_user
from tests.mcp_server.conftest import McpProcess
from tests.mcp_server.mcp_client import http_transport, run, text
from tests.mcp_server.oauth import (
    REDIRECT_URI,
    Approver,
    MemoryStorage,
    bound_application,
    hidden_inputs,
    minted_token,
    oauth_transport,
    pkce_pair,
)
from tests.mcp_server.test_app import ACCEPT, INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)

NOT_FOUND = "Not found (404 not_found): Not found."


@pytest.fixture(scope="module")
def oauth_mcp(live_server, django_db_setup, tmp_path_factory):
    """A `runmcp` that names the live server as its authorization server."""
    server = McpProcess(tmp_path_factory.mktemp("mcp-oauth") / "runmcp.log", env={"OAUTH_ISSUER": live_server.url})
    yield server.start()
    server.stop()


@pytest.fixture
def issuer(live_server, settings):
    """The live server is the authorization server: its metadata names itself."""
    settings.OAUTH_ISSUER = live_server.url
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": live_server.url}
    return live_server.url


def post_mcp(url, headers):
    return httpx.post(url, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=10)


def with_approver(user, base_url, scenario):
    """Runs `await scenario(approver)` with a logged-in staff member."""

    async def main():
        approver = Approver(base_url, user)
        try:
            await approver.login()
            return await scenario(approver)
        finally:
            await approver.aclose()

    return anyio.run(main)


def register(issuer, **metadata) -> httpx.Response:
    body = {"client_name": "Manual host", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
    return httpx.post(f"{issuer}/oauth/register/", json={**body, **metadata}, timeout=10)


def authorization_url(issuer, client_id, challenge, resource, **extra) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "st4te",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "mcp",
        "resource": resource,
        **extra,
    }
    return str(httpx.URL(f"{issuer}/oauth/authorize/", params={k: v for k, v in params.items() if v is not None}))


def exchange(issuer, client_id, code, verifier, resource) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": resource,
    }
    return httpx.post(f"{issuer}/oauth/token/", data=data, timeout=10)


def tokens_by_hand(issuer, mcp_url, staff, client) -> dict:
    """Registration, approval and the code exchange done step by step, as any OAuth host would."""
    client_id = register(issuer).json()["client_id"]
    verifier, challenge = pkce_pair()

    async def approve(approver):
        return await approver.approve(authorization_url(issuer, client_id, challenge, mcp_url), client=client)

    code = with_approver(staff, issuer, approve)["code"]
    response = exchange(issuer, client_id, code, verifier, mcp_url)
    assert response.status_code == 200, response.text
    return {**response.json(), "client_id": client_id}


def test_the_metadata_documents_lead_a_host_from_mcp_to_the_authorization_server(oauth_mcp, issuer):
    unauthenticated = post_mcp(oauth_mcp.url, {})
    resource_metadata = f"http://127.0.0.1:{oauth_mcp.port}/.well-known/oauth-protected-resource/mcp"

    assert unauthenticated.status_code == 401
    assert unauthenticated.headers.get_list("WWW-Authenticate") == [
        f'Bearer resource_metadata="{resource_metadata}", scope="mcp"',
        "Api-Key",
    ]
    for url in (resource_metadata, resource_metadata.removesuffix("/mcp")):
        assert httpx.get(url, timeout=10).json() == {
            "resource": oauth_mcp.url,
            "authorization_servers": [issuer],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
            "resource_name": "Memory Platform MCP",
        }
    server = httpx.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=10).json()
    assert server["issuer"] == issuer
    assert server["authorization_endpoint"] == f"{issuer}/oauth/authorize/"
    assert server["token_endpoint"] == f"{issuer}/oauth/token/"
    assert server["registration_endpoint"] == f"{issuer}/oauth/register/"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["response_types_supported"] == ["code"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["scopes_supported"] == ["mcp"]
    assert server["authorization_response_iss_parameter_supported"] is True


def test_an_mcp_host_signs_in_with_oauth_and_acts_as_the_approved_client(
    oauth_mcp, issuer, client_a, foreign_client, add_messages
):
    """Discovery, registration, approval, PKCE exchange by the SDK's own OAuth client; then the tools
    answer with client A's data and nothing of organisation B's."""
    add_messages(client_a, user_id="alice", session_id="chat-a")
    add_messages(foreign_client, user_id="bob", session_id="chat-b")
    staff = staff_user(client_a.organization)
    storage = MemoryStorage()

    async def scenario(approver):
        connect = oauth_transport(oauth_mcp.url, approver, client=client_a, storage=storage)

        async def session_calls(session):
            return {
                "tools": await session.list_tools(),
                "sessions": await session.call_tool("list_sessions", {}),
                "foreign": await session.call_tool("get_session", {"user_id": "bob", "session_id": "chat-b"}),
                "add": await session.call_tool(
                    "add_memory",
                    {"user_id": "alice", "session_id": "via-oauth", "messages": [{"role": "user", "content": "hi"}]},
                ),
            }

        async with connect() as (read, write):
            from mcp import ClientSession

            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session_calls(session)

    results = with_approver(staff, issuer, scenario)

    assert "list_sessions" in {tool.name for tool in results["tools"].tools}
    sessions = results["sessions"].structured_content
    assert [item["session_id"] for item in sessions["results"]] == ["chat-a"] and sessions["count"] == 1
    assert results["foreign"].is_error and NOT_FOUND in text(results["foreign"])
    assert not results["add"].is_error, text(results["add"])
    added = Session.objects.get(session_id="via-oauth")
    assert (added.organization_id, added.scope) == (client_a.organization_id, client_a.write_scope)

    binding = ApplicationBinding.objects.select_related("application").get()
    assert (binding.client, binding.bound_by, binding.application.client_type) == (client_a, staff, "public")
    assert binding.application.client_id == storage.client_info.client_id
    token = AccessToken.objects.get(application=binding.application, scope="mcp")  # not the registration's
    assert token.resource == [oauth_mcp.url] and token.scope == "mcp" and token.token == ""  # hashed at rest
    assert storage.tokens.refresh_token

    # The same endpoint still takes the client's API key, and answers it alike.
    api_key = http_transport(oauth_mcp.url, {"Authorization": f"Api-Key {client_a.raw_key}"})
    by_key = run(api_key, lambda session: session.call_tool("list_sessions", {}))
    assert {item["session_id"] for item in by_key.structured_content["results"]} == {"chat-a", "via-oauth"}


def test_a_wrong_or_missing_pkce_verifier_gets_no_token(oauth_mcp, issuer, client_a):
    staff = staff_user(client_a.organization)
    client_id = register(issuer).json()["client_id"]
    verifier, challenge = pkce_pair()

    async def approve(approver):
        codes = [
            (await approver.approve(authorization_url(issuer, client_id, challenge, oauth_mcp.url), client=client_a))
            for _ in range(2)
        ]
        no_pkce = await approver.open(authorization_url(issuer, client_id, None, oauth_mcp.url))
        # django-oauth-toolkit refuses `plain` when it would issue the code, after the approval.
        plain = await approver.decide(
            authorization_url(issuer, client_id, challenge, oauth_mcp.url, code_challenge_method="plain"),
            client=client_a,
        )
        return codes, no_pkce, plain

    (first, second), no_pkce, plain = with_approver(staff, issuer, approve)

    wrong = exchange(issuer, client_id, first["code"], pkce_pair()[0], oauth_mcp.url)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    missing = exchange(issuer, client_id, second["code"], "", oauth_mcp.url)
    assert missing.status_code == 400 and missing.json()["error"] in {"invalid_request", "invalid_grant"}
    assert not AccessToken.objects.filter(application__client_id=client_id, scope="mcp").exists()
    # An authorization request without a challenge, or with `plain`, goes back to the host as an error.
    for refused in (no_pkce, plain):
        assert refused.status_code == 302 and "error=invalid_request" in refused.headers["location"]
    assert first["iss"] == issuer


def test_a_token_stops_working_when_its_client_is_disabled_or_its_tokens_revoked(oauth_mcp, issuer, client_a):
    staff = staff_user(client_a.organization)
    token = tokens_by_hand(issuer, oauth_mcp.url, staff, client_a)["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    assert post_mcp(oauth_mcp.url, bearer).status_code == 200

    client_set_status(client=client_a, status="disabled")
    disabled = post_mcp(oauth_mcp.url, bearer)
    client_set_status(client=client_a, status="active")
    assert post_mcp(oauth_mcp.url, bearer).status_code == 200
    client_oauth_revoke(client=client_a)
    revoked = post_mcp(oauth_mcp.url, bearer)

    metadata = f"http://127.0.0.1:{oauth_mcp.port}/.well-known/oauth-protected-resource/mcp"
    for response, message in (
        (disabled, "This client is disabled."),
        (revoked, "The access token is invalid, expired or revoked."),
    ):
        assert response.status_code == 401
        assert response.json()["error"]["message"] == message
        assert response.headers["WWW-Authenticate"] == (
            f'Bearer error="invalid_token", error_description="{message}", resource_metadata="{metadata}"'
        )
    assert not ApplicationBinding.objects.exists()


def test_a_refresh_token_rotates_and_a_reused_one_is_refused(oauth_mcp, issuer, client_a):
    staff = staff_user(client_a.organization)
    first = tokens_by_hand(issuer, oauth_mcp.url, staff, client_a)

    def refresh(refresh_token):
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": first["client_id"]}
        return httpx.post(f"{issuer}/oauth/token/", data={**data, "resource": oauth_mcp.url}, timeout=10)

    second = refresh(first["refresh_token"])
    assert second.status_code == 200, second.text
    assert second.json()["refresh_token"] != first["refresh_token"]
    assert post_mcp(oauth_mcp.url, {"Authorization": f"Bearer {second.json()['access_token']}"}).status_code == 200

    reused = refresh(first["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"


def test_deleting_the_client_stops_its_tokens(mcp_server, client_a):
    token = minted_token(client_a)
    bearer = {"Authorization": f"Bearer {token}"}
    assert post_mcp(mcp_server.url, bearer).status_code == 200

    client_a.delete()

    response = post_mcp(mcp_server.url, bearer)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "The access token's application is not bound to a platform client."


@pytest.mark.parametrize(
    ("token_options", "message"),
    [
        ({"scope": "read"}, "was not issued for this MCP endpoint"),
        ({"resource": ["https://elsewhere.example/mcp"]}, "was not issued for this MCP endpoint"),
        ({"expires_in": -1}, "invalid, expired or revoked"),
    ],
)
def test_a_token_for_another_scope_or_resource_or_expired_is_refused(mcp_server, client_a, token_options, message):
    token = minted_token(client_a, **token_options)

    response = post_mcp(mcp_server.url, {"Authorization": f"Bearer {token}"})

    assert response.status_code == 401 and message in response.json()["error"]["message"]


def test_a_token_of_an_unbound_application_is_refused(mcp_server, client_a):
    token = minted_token(client_a)
    ApplicationBinding.objects.all().delete()

    response = post_mcp(mcp_server.url, {"Authorization": f"Bearer {token}"})

    assert response.status_code == 401
    assert response.json()["error"]["message"] == "The access token's application is not bound to a platform client."


def test_staff_approve_only_for_clients_of_their_organisation(issuer, client_a, foreign_client):
    staff = staff_user(client_a.organization)
    application = bound_application(foreign_client)
    unbound_id = register(issuer).json()["client_id"]
    _, challenge = pkce_pair()

    async def scenario(approver):
        foreign_pick = await approver.decide(
            authorization_url(issuer, unbound_id, challenge, None), client=foreign_client
        )
        bound_url = authorization_url(issuer, application.client_id, challenge, None)
        bound_page = await approver.open(bound_url)
        # The form of another application's page posted for it anyway, with the staff's own client.
        fields = hidden_inputs((await approver.open(authorization_url(issuer, unbound_id, challenge, None))).text)
        fields.update(client_id=application.client_id, platform_client=str(client_a.pk), allow="Approve")
        tampered = await approver.http.post(bound_url, data=fields)
        return foreign_pick, bound_page, tampered

    foreign_pick, bound_page, tampered = with_approver(staff, issuer, scenario)

    # A foreign client is not offered, so not accepted: the page comes back naming the field. An
    # application bound to another organisation's client is refused before its page.
    assert foreign_pick.status_code == 200 and "Select a valid choice" in foreign_pick.text
    assert bound_page.status_code == 403
    assert tampered.status_code == 200 and "Select a valid choice" in tampered.text
    assert ApplicationBinding.objects.get().client == foreign_client
    assert not ApplicationBinding.objects.filter(application__client_id=unbound_id).exists()


def test_a_denial_goes_back_to_the_host_and_binds_nothing(issuer, client_a):
    staff = staff_user(client_a.organization)
    client_id = register(issuer).json()["client_id"]

    async def deny(approver):
        return await approver.decide(authorization_url(issuer, client_id, pkce_pair()[1], None), allow=False)

    response = with_approver(staff, issuer, deny)

    assert response.status_code == 302
    assert response.headers["location"].startswith(f"{REDIRECT_URI}?error=access_denied")
    assert not ApplicationBinding.objects.exists()


def test_the_authorize_page_is_for_staff_only(issuer, client_a, django_user_model):
    client_id = register(issuer).json()["client_id"]
    url = authorization_url(issuer, client_id, pkce_pair()[1], None)

    anonymous = httpx.get(url, timeout=10)
    assert anonymous.status_code == 302 and anonymous.headers["location"].startswith("/admin/login/?next=")

    from django.test import Client as Browser

    browser = Browser()
    browser.force_login(django_user_model.objects.create_user("visitor", password="x"))
    assert browser.get(url.removeprefix(issuer)).status_code == 403


@pytest.mark.parametrize(
    ("metadata", "error", "description"),
    [
        ({"redirect_uris": ["http://host.example/cb"]}, "invalid_redirect_uri", "http redirect URIs must be loopback"),
        ({"redirect_uris": ["myapp:/cb"]}, "invalid_redirect_uri", "the scheme must be https"),
        ({"redirect_uris": []}, "invalid_redirect_uri", "redirect_uris must be a non-empty array"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata", "grant_types may only be"),
        ({"response_types": ["token"]}, "invalid_client_metadata", "response_types may only be code"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata", "token_endpoint_auth_method"),
    ],
)
def test_registration_refuses_what_an_mcp_host_does_not_need(issuer, metadata, error, description):
    response = register(issuer, **metadata)

    assert response.status_code == 400
    assert response.json()["error"] == error and description in response.json()["error_description"]
    assert not Application.objects.exists()


def test_registration_refuses_a_body_that_is_not_json(issuer):
    response = httpx.post(f"{issuer}/oauth/register/", content=b"{oops", timeout=10)

    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "The body must be a JSON object.",
    }
