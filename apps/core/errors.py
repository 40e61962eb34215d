"""One JSON error shape for every API error: {"error": {"status", "code", "message", "details"}}."""

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from apps.core.logs import error_class, request_route

logger = logging.getLogger(__name__)

NOT_FOUND_MESSAGE = "Not found."


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class ConflictError(Exception):
    """Raised by services when a write conflicts with stored state; the API answers 409."""


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than the limit."
    default_code = "payload_too_large"


# The database refused or dropped the connection (restart, failover, network), or gave up on a
# statement (lock or statement timeout): the request may succeed if sent again shortly.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5


def database_unavailable_response() -> JsonResponse:
    """A JSON 503 with Retry-After, which clients (the SDK among them) retry."""
    body = error_body(
        status_code=503,
        code="service_unavailable",
        message="The database is briefly unavailable; retry the request in a few seconds.",
    )
    response = JsonResponse(body, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def error_body(*, status_code: int, code: str, message: str, details=None) -> dict:
    body = {"status": status_code, "code": code, "message": message}
    if details:
        body["details"] = details
    return {"error": body}


def not_found_response() -> JsonResponse:
    """The only 404 the API gives: a foreign id and a missing id are indistinguishable."""
    return JsonResponse(error_body(status_code=404, code="not_found", message=NOT_FOUND_MESSAGE), status=404)


def _flatten(detail, prefix="") -> list[str]:
    """Turn DRF's nested error detail into "field.sub: message" lines."""
    if isinstance(detail, dict):
        lines = []
        for key, value in detail.items():
            name = prefix if key == "non_field_errors" else (f"{prefix}.{key}" if prefix else str(key))
            lines.extend(_flatten(value, name))
        return lines
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return [f"{prefix}: {item}" if prefix else str(item) for item in detail]
        lines = []
        for index, item in enumerate(detail):
            if item:
                lines.extend(_flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return lines
    return [f"{prefix}: {detail}" if prefix else str(detail)]


def api_exception_handler(exc, context):
    if isinstance(exc, DATABASE_UNAVAILABLE):
        # Not a bug but an outage: one line with the error class; the connection is replaced on the next request.
        request = context.get("request")
        logger.warning(
            "database unavailable on %s %s: %s", getattr(request, "method", "-"),
            request_route(request) if request is not None else "(no route)", error_class(exc),
        )
        return database_unavailable_response()
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(NOT_FOUND_MESSAGE)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, ConflictError):
        exc = Conflict(str(exc))
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)

    response = exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: the middleware renders the JSON 500

    if isinstance(exc, exceptions.ValidationError):
        lines = _flatten(exc.detail)
        body = error_body(
            status_code=response.status_code,
            code="invalid",
            message="Invalid input: " + "; ".join(lines),
            details=exc.detail,
        )
    elif isinstance(exc, exceptions.NotFound):
        body = error_body(status_code=404, code="not_found", message=NOT_FOUND_MESSAGE)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        codes = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        body = error_body(
            status_code=response.status_code,
            code=codes if isinstance(codes, str) else "error",
            message=str(detail) if not isinstance(detail, (dict, list)) else "; ".join(_flatten(detail)),
            # What an exception adds for the caller (a rate limit names its limit: apps.core.throttling).
            details=getattr(exc, "error_details", None),
        )
    return Response(body, status=response.status_code, headers=_kept_headers(response))


def _kept_headers(response) -> dict:
    return {name: response[name] for name in ("WWW-Authenticate", "Retry-After", "Allow") if response.has_header(name)}
