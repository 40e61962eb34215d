"""Exceptions raised by the client; API errors carry the platform's JSON error as it was sent."""

from __future__ import annotations

from typing import Any


class MemoryPlatformError(Exception):
    """Base class of every exception this package raises."""


class APIConnectionError(MemoryPlatformError):
    """The platform could not be reached (after the retries), or the connection broke mid-request."""


class TaskTimeoutError(MemoryPlatformError, TimeoutError):
    """`wait_for_task` gave up before the task finished; `task` is its last known state."""

    def __init__(self, message: str, task: dict[str, Any]):
        super().__init__(message)
        self.task = task


class APIError(MemoryPlatformError):
    """An error answer: `{"error": {"status", "code", "message", "details"}}` from the platform.

    `status`, `code`, `message` and `details` are the body's fields; `body` is the whole JSON body
    (or None when the answer was not the platform's JSON, e.g. a proxy's HTML page).
    """

    def __init__(self, status: int, code: str, message: str, details: Any = None, body: Any = None, headers=None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.body = body
        self.headers = dict(headers or {})


class ValidationError(APIError):
    """400 or 422: the request was refused as invalid; `details` names the offending fields."""


class AuthenticationError(APIError):
    """401: no API key, or a wrong, revoked or disabled one."""


class PermissionDeniedError(APIError):
    """403: the key is valid but may not do this (read-only client, foreign scope, no erasure right)."""


class NotFoundError(APIError):
    """404: missing, or another organisation's (the platform does not tell the two apart)."""


class ConflictError(APIError):
    """409: e.g. adding to a sealed session, or one Idempotency-Key reused for a different body."""


class PayloadTooLargeError(APIError):
    """413: the request body is larger than the platform accepts."""


class RateLimitError(APIError):
    """429 after the retries were used up."""


class ServerError(APIError):
    """5xx after the retries were used up."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitError,
}


def error_from_body(status: int, body: Any, headers=None) -> APIError:
    """The exception for an error answer, from its status and decoded JSON body (any shape)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "error")
        message = str(error.get("message") or "")
        details = error.get("details")
    else:
        code, message, details = "error", f"HTTP {status}", None
        body = body if isinstance(body, (dict, list)) else None
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    return cls(status, code, message, details=details, body=body, headers=headers)
