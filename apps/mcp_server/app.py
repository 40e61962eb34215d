"""The streamable HTTP MCP endpoint (`/mcp`) as an ASGI application: the official SDK's transport
behind the platform's own Host check and API-key authentication."""

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
from apps.tenancy.auth import client_for_raw_key, raw_key_from_headers

MCP_PATH = "/mcp"
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


def _error_headers(exc: APIError) -> dict | None:
    if exc.status == 401:
        return {"WWW-Authenticate": "Api-Key"}
    if exc.status == 429:
        return {"Retry-After": str(exc.details["retry_after_seconds"])}
    return None


def _authenticate(*, headers: Headers):
    raw_key = raw_key_from_headers(
        authorization=headers.get("authorization", ""), x_api_key=headers.get("x-api-key", "")
    )
    if raw_key is None:
        raise exceptions.NotAuthenticated("An API key is required: send 'Authorization: Api-Key <key>'.")
    client, _api_key = client_for_raw_key(raw_key)
    rate_limit_check(client=client)  # one count per HTTP request, as in the REST API
    return client


class APIKeyAuthMiddleware:
    """Every request to /mcp must carry a valid key of an active client, as every REST request does:
    otherwise 401 with the platform's JSON error. Then only POST reaches the transport (others: 405,
    as the REST API answers a method it lacks after authenticating). The client rides in the ASGI
    scope's state, where the tools read it (`ctx.request_context.request.state`)."""

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
            loop = asyncio.get_running_loop()
            try:
                client = await loop.run_in_executor(
                    self.executor, partial(in_request_cycle, _authenticate, headers=headers)
                )
            except APIError as exc:
                response = _error(exc.status, exc.code, exc.message, headers=_error_headers(exc), details=exc.details)
                return await response(scope, receive, send)
            if scope["method"] != "POST":
                return await _method_not_allowed(scope["method"])(scope, receive, send)
            scope.setdefault("state", {})[CLIENT_STATE] = client
        return await self.app(scope, receive, send)


def _method_not_allowed(method: str) -> JSONResponse:
    """Stateless, the transport has no stream for server-initiated messages and no session: its GET
    would hold an event stream open that never carries a message, and its DELETE has nothing to end.
    The streamable HTTP spec lets a server answer GET with 405; every method but POST gets it here."""
    return _error(
        405,
        "method_not_allowed",
        f"{method} is not allowed on /mcp: this stateless server offers no event stream (GET) and no session "
        "to end (DELETE); send each JSON-RPC message with POST.",
        headers={"Allow": "POST"},
    )


async def healthz(request):
    return JSONResponse({"status": "ok"})


def build_application():
    """The ASGI application `manage.py runmcp` serves. Stateless and answering in JSON: any process
    can take any request, and a tool's answer is one response."""
    executor = ThreadPoolExecutor(max_workers=settings.MCP_THREADS, thread_name_prefix="mcp-orm")

    def backend_for(ctx) -> PlatformBackend:
        return PlatformBackend(client=getattr(ctx.request_context.request.state, CLIENT_STATE), executor=executor)

    server = build_server(backend_for, version=tools_version)
    server.custom_route("/healthz", methods=["GET"])(healthz)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        # The Host header is checked against ALLOWED_HOSTS above, as Django checks it.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return APIKeyAuthMiddleware(app, executor=executor)
