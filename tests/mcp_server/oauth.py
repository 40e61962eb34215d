"""OAuth for the MCP tests: a staff member who approves at the authorize page over HTTP (the test
plays the person), the MCP SDK's OAuth provider wired to them, and tokens minted straight into the
database for tests about what a token may do rather than how it is obtained."""

import base64
import hashlib
import secrets
from contextlib import asynccontextmanager
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import httpx2 as httpx
from django.utils import timezone
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, Application, set_token_value

from apps.oauth.services import application_bind
from tests.admin.makers import PASSWORD

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the test reads the redirect itself


class _Inputs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.values = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "input" and attrs.get("type") == "hidden" and attrs.get("name"):
            self.values[attrs["name"]] = attrs.get("value") or ""


def hidden_inputs(html: str) -> dict:
    parser = _Inputs()
    parser.feed(html)
    return parser.values


class Approver:
    """A staff member at the authorization server, logged in through the admin login page."""

    def __init__(self, base_url: str, user):
        self.http = httpx.AsyncClient(base_url=base_url, follow_redirects=False, timeout=30)
        self.user = user

    async def login(self):
        page = await self.http.get("/admin/login/")
        token = hidden_inputs(page.text)["csrfmiddlewaretoken"]
        response = await self.http.post(
            "/admin/login/",
            data={
                "username": self.user.username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": token,
                "next": "/admin/",
            },
        )
        assert response.status_code == 302, response.text

    async def open(self, authorization_url: str) -> httpx.Response:
        return await self.http.get(authorization_url)

    async def decide(self, authorization_url: str, *, client=None, allow=True) -> httpx.Response:
        page = await self.open(authorization_url)
        assert page.status_code == 200, page.text
        fields = hidden_inputs(page.text)
        if client is not None:
            fields["platform_client"] = str(client.pk)
        if allow:
            fields["allow"] = "Approve"
        return await self.http.post(authorization_url, data=fields)

    async def approve(self, authorization_url: str, *, client) -> dict:
        """The parameters the authorization server redirects the browser back to the host with."""
        response = await self.decide(authorization_url, client=client)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI), location
        return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}

    async def aclose(self):
        await self.http.aclose()


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def oauth_transport(mcp_url: str, approver: Approver, *, client, storage: MemoryStorage):
    """An MCP host with the SDK's OAuth provider: on the first 401 it discovers, registers, sends the
    person to the authorize page (the approver, choosing `client`) and exchanges the code with PKCE."""
    redirected = {}

    async def redirect_handler(authorization_url: str):
        redirected.update(await approver.approve(authorization_url, client=client))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected.get("state"), iss=redirected.get("iss")
        )

    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Test MCP host",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    @asynccontextmanager
    async def connect():
        async with httpx.AsyncClient(auth=provider, timeout=30) as http:
            async with streamable_http_client(mcp_url, http_client=http) as streams:
                yield streams

    return connect


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def bound_application(client, *, name="Bound host") -> Application:
    application = Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
    )
    application_bind(application=application, client=client)
    return application


def minted_token(client, *, scope="mcp", resource=None, expires_in=3600) -> str:
    """A token of an application bound to `client`, as the token endpoint stores it (hashed)."""
    raw = secrets.token_urlsafe(32)
    token = AccessToken(
        application=bound_application(client, name=f"Host of {client.name} {raw[:6]}"),
        scope=scope,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=resource or [],
    )
    set_token_value(token, raw)
    token.save()
    return raw
