"""The streamable HTTP MCP endpoint (`/mcp`) as an ASGI application: the SDK's transport behind the
platform's Host check and authentication (an API key or an OAuth access token, RFC 9728)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings
from memory_platform_client import __version__ as tools_version
from memory_platform_client.errors import APIError
from memory_platform_client.mcp_server.tools import build_server
from rest_framework import exceptions
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from apps.core.errors import error_body
from apps.core.throttling import rate_limit_check
from apps.mcp_server.backend import PlatformBackend, in_request_cycle
from apps.oauth.selectors import SCOPE, InvalidToken, client_for_access_token
from apps.tenancy.auth import client_for_raw_key, raw_key_from_headers

MCP_PATH = "/mcp"
# RFC 9728: the metadata of the resource at /mcp; hosts also look at the root form.
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
CLIENT_STATE = "memory_platform_client"


def _error(status: int, code: str, message: str, headers: dict | None = None, details=None) -> JSONResponse:
    return JSONResponse(
        error_body(status_code=status, code=code, message=message, details=details), status_code=status, headers=headers
    )


def _allowed_host(host: str) -> bool:
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # what Django allows in the same case
    return bool(domain) and validate_host(domain, allowed)


def _origin(scope, headers: Headers) -> str:
    """As the caller reached it: the Host header is checked first; uvicorn honours X-Forwarded-Proto."""
    return f"{scope['scheme']}://{headers['host']}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bearer_token(headers: Headers) -> str | None:
    """ "" for an empty bearer token, None for none."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _challenges(exc: APIError, *, headers: Headers, metadata_url: str) -> list[tuple[str, str]]:
    """Bearer with the resource metadata, so an OAuth host finds the authorization server (RFC 9728
    5.1), and Api-Key; a refused bearer token gets RFC 6750's invalid_token instead."""
    if _bearer_token(headers) is not None:
        error = f"error={_quoted('invalid_token')}, error_description={_quoted(exc.message)}, "
        return [("WWW-Authenticate", f"Bearer {error}resource_metadata={_quoted(metadata_url)}")]
    return [
        ("WWW-Authenticate", f"Bearer resource_metadata={_quoted(metadata_url)}, scope={_quoted(SCOPE)}"),
        ("WWW-Authenticate", "Api-Key"),
    ]


def _authenticate(*, headers: Headers, resource: str):
    token = _bearer_token(headers)
    if token is not None:
        if not token:
            raise InvalidToken("Authorization header must be 'Bearer <token>' with a token.")
        client = client_for_access_token(raw_token=token, resource=resource)
    else:
        try:
            raw_key = raw_key_from_headers(
                authorization=headers.get("authorization", ""), x_api_key=headers.get("x-api-key", "")
            )
        except exceptions.AuthenticationFailed:
            raise exceptions.AuthenticationFailed(
                "Authorization header must be 'Api-Key <key>' or 'Bearer <OAuth access token>'."
            ) from None
        if raw_key is None:
            raise exceptions.NotAuthenticated(
                "An API key or an OAuth access token is required: send 'Authorization: Api-Key <key>' or "
                "'Authorization: Bearer <token>'."
            )
        client, _api_key = client_for_raw_key(raw_key)
    rate_limit_check(client=client)  # one count per HTTP request, as in the REST API
    return client


class AuthMiddleware:
    """Authenticates /mcp as the REST API does (405 for a method but POST only after that) and puts
    the client in the ASGI scope's state, where the tools read it."""

    def __init__(self, app, *, executor):
        self.app = app
        self.executor = executor

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        if not _allowed_host(headers.get("host", "")):
            return await _error(400, "bad_request", "Invalid Host header.")(scope, receive, send)
        if scope["path"].rstrip("/") == MCP_PATH:
            origin = _origin(scope, headers)
            try:
                client = await asyncio.get_running_loop().run_in_executor(
                    self.executor,
                    partial(in_request_cycle, _authenticate, headers=headers, resource=origin + MCP_PATH),
                )
            except APIError as exc:
                retry = {"Retry-After": str(exc.details["retry_after_seconds"])} if exc.status == 429 else None
                response = _error(exc.status, exc.code, exc.message, headers=retry, details=exc.details)
                if exc.status == 401:
                    metadata_url = origin + RESOURCE_METADATA_PATH + MCP_PATH
                    for name, value in _challenges(exc, headers=headers, metadata_url=metadata_url):
                        response.headers.append(name, value)
                return await response(scope, receive, send)
            if scope["method"] != "POST":
                # Stateless, a GET stream would never carry a message and a DELETE has no session to end.
                response = _error(
                    405,
                    "method_not_allowed",
                    f"{scope['method']} is not allowed on /mcp: this stateless server offers no event stream (GET) "
                    "and no session to end (DELETE); send each JSON-RPC message with POST.",
                    headers={"Allow": "POST"},
                )
                return await response(scope, receive, send)
            scope.setdefault("state", {})[CLIENT_STATE] = client
        return await self.app(scope, receive, send)


async def healthz(request):
    return JSONResponse({"status": "ok"})


async def protected_resource_metadata(request):
    """RFC 9728: /mcp is protected by OAUTH_ISSUER with scope `mcp`."""
    origin = _origin(request.scope, request.headers)
    metadata = {
        "resource": origin + MCP_PATH,
        "authorization_servers": [settings.OAUTH_ISSUER],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Memory Platform MCP",
    }
    return JSONResponse(metadata, headers={"Access-Control-Allow-Origin": "*"})


def build_application():
    """Stateless and answering in JSON: any process can take any request."""
    executor = ThreadPoolExecutor(max_workers=settings.MCP_THREADS, thread_name_prefix="mcp-orm")

    def backend_for(ctx) -> PlatformBackend:
        return PlatformBackend(client=getattr(ctx.request_context.request.state, CLIENT_STATE), executor=executor)

    server = build_server(backend_for, version=tools_version)
    server.custom_route("/healthz", methods=["GET"])(healthz)
    for path in (RESOURCE_METADATA_PATH + MCP_PATH, RESOURCE_METADATA_PATH):
        server.custom_route(path, methods=["GET"])(protected_resource_metadata)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        # The Host header is checked against ALLOWED_HOSTS above, as Django checks it.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return AuthMiddleware(app, executor=executor)
