"""One error family raised by every operation, mapped once per transport (REST here, MCP in
apps.mcp_server.backend) to one JSON shape: {"error": {"status", "code", "message", "details"}}."""

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from apps.core.logs import error_class, request_route

logger = logging.getLogger(__name__)


class ApplicationError(Exception):
    status = 400
    code = "error"
    default_message = "The request could not be done."

    def __init__(self, message: str | None = None, *, details=None, status: int | None = None, code: str | None = None):
        self.message = message or self.default_message
        self.details = details
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        super().__init__(self.message)

    def body(self) -> dict:
        return error_body(status_code=self.status, code=self.code, message=self.message, details=self.details)


class InvalidInput(ApplicationError):
    """400 naming each bad field: `details` maps field names (nested for nested input) to messages."""

    code = "invalid"

    def __init__(self, details):
        super().__init__("Invalid input: " + "; ".join(_flatten(details)), details=details)


class PermissionDenied(ApplicationError):
    status = 403
    code = "permission_denied"
    default_message = "You do not have permission to perform this action."


class NotFound(ApplicationError):
    """The only 404 the API gives: a foreign id and a missing id are indistinguishable."""

    status = 404
    code = "not_found"
    default_message = "Not found."

    def __init__(self):
        super().__init__()


class ConflictError(ApplicationError):
    """A write that conflicts with stored state (a sealed session, a reused Idempotency-Key): 409."""

    status = 409
    code = "conflict"
    default_message = "The request conflicts with the current state of the resource."


class PayloadTooLarge(ApplicationError):
    status = 413
    code = "payload_too_large"
    default_message = "The request body is larger than the limit."


# The database refused or dropped the connection (restart, failover, network), or gave up on a
# statement (lock or statement timeout): the request may succeed if sent again shortly.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5


class DatabaseUnavailable(ApplicationError):
    status = 503
    code = "service_unavailable"
    default_message = "The database is briefly unavailable; retry the request in a few seconds."


def database_unavailable_response() -> JsonResponse:
    """A JSON 503 with Retry-After, which clients (the SDK among them) retry."""
    return JsonResponse(DatabaseUnavailable().body(), status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def error_body(*, status_code: int, code: str, message: str, details=None) -> dict:
    body = {"status": status_code, "code": code, "message": message}
    return {"error": body | ({"details": details} if details else {})}


def _flatten(detail, prefix="") -> list[str]:
    """Nested error details as "field.sub: message" lines."""
    if isinstance(detail, dict):
        named = [
            (prefix if key == "non_field_errors" else _dotted(prefix, key), value) for key, value in detail.items()
        ]
    elif isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        named = [(_dotted(prefix, index), item) for index, item in enumerate(detail) if item]
    else:
        messages = detail if isinstance(detail, list) else [detail]
        return [f"{prefix}: {item}" if prefix else str(item) for item in messages]
    return [line for name, value in named for line in _flatten(value, name)]


def _dotted(prefix: str, key) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def as_application_error(exc: Exception) -> ApplicationError | None:
    """The member of the family an exception stands for; None for an unexpected error (a 500)."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return DatabaseUnavailable()
    if isinstance(exc, (Http404, exceptions.NotFound)):
        return NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return PermissionDenied(str(exc) or None)
    if isinstance(exc, DjangoValidationError):
        return InvalidInput(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, exceptions.ValidationError):
        return InvalidInput(exc.detail)
    if isinstance(exc, exceptions.APIException):
        codes, detail = exc.get_codes(), exc.detail
        message = "; ".join(_flatten(detail)) if isinstance(detail, (dict, list)) else str(detail)
        # What an exception adds for the caller (a rate limit names its limit: apps.core.throttling).
        return ApplicationError(
            message,
            status=exc.status_code,
            code=codes if isinstance(codes, str) else "error",
            details=getattr(exc, "error_details", None),
        )
    return None


def api_exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER. DRF's own still runs, for its headers and to roll back the atomic request."""
    if isinstance(exc, DATABASE_UNAVAILABLE):
        # Not a bug but an outage: one line with the error class; the connection is replaced on the next request.
        request = context.get("request")
        logger.warning(
            "database unavailable on %s %s: %s",
            getattr(request, "method", "-"),
            request_route(request) if request is not None else "(no route)",
            error_class(exc),
        )
        return database_unavailable_response()
    error = as_application_error(exc)
    if error is None:
        return None  # an unexpected error: the middleware renders the JSON 500
    response = exception_handler(
        exc if isinstance(exc, exceptions.APIException) else exceptions.APIException(), context
    )
    # Never None: DRF's handler answers every APIException.
    kept = ("WWW-Authenticate", "Retry-After", "Allow")
    headers = {name: response[name] for name in kept if response.has_header(name)}
    return Response(error.body(), status=error.status, headers=headers)
