"""JSON instead of HTML for errors raised outside DRF views (unmatched URLs, crashes, body limits),
and the query-string rule of apps.core.validation for the pages outside the API."""

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse

from apps.core.errors import (
    DATABASE_UNAVAILABLE,
    RETRY_AFTER_SECONDS,
    NotFound,
    database_unavailable_response,
    error_body,
)
from apps.core.logs import error_class, request_route
from apps.core.validation import text_problem

logger = logging.getLogger(__name__)

JSON_PREFIXES = ("/api/", "/healthz", "/readyz")
MESSAGES = {
    400: ("bad_request", "The request could not be understood."),
    403: ("permission_denied", "You do not have permission to perform this action."),
    404: (NotFound.code, NotFound.default_message),
    405: ("method_not_allowed", "This method is not allowed on this endpoint."),
    413: ("payload_too_large", "The request body is larger than the limit."),
    500: ("server_error", "An unexpected error occurred; it has been logged."),
}


def _json_error(status: int) -> JsonResponse:
    code, message = MESSAGES.get(status, ("error", "The request failed."))
    return JsonResponse(error_body(status_code=status, code=code, message=message), status=status)


class JSONErrorsForAPIMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(JSON_PREFIXES) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        return _json_error(response.status_code)

    def process_exception(self, request, exception):
        if isinstance(exception, DATABASE_UNAVAILABLE):
            # Not a bug but an outage: one line with the library's own message (no request data in it).
            logger.warning(
                "database unavailable on %s %s: %s", request.method, request_route(request), error_class(exception)
            )
            if request.path.startswith(JSON_PREFIXES):
                return database_unavailable_response()
            return HttpResponse(
                "The database is briefly unavailable; reload the page in a few seconds.\n",
                status=503,
                content_type="text/plain; charset=utf-8",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        if not request.path.startswith(JSON_PREFIXES):
            return None
        if isinstance(exception, RequestDataTooBig):
            return _json_error(413)
        # The route, not the path: paths carry user and session ids. The traceback is redacted by the handlers.
        logger.error(
            "unhandled %s on %s %s", error_class(exception), request.method, request_route(request), exc_info=exception
        )
        return _json_error(500)


class RefuseUnstorableQueryMiddleware:
    """Outside the API, a query string holding NUL is a 400 before any view runs: admin filters like
    `?status__exact=%00` would otherwise reach a query and answer 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(JSON_PREFIXES):
            for name, values in request.GET.lists():
                if any(text_problem(text) for text in [name, *values]):
                    return HttpResponseBadRequest(
                        f"Query parameter {name!r} must not contain NUL characters or unpaired surrogates.",
                        content_type="text/plain; charset=utf-8",
                    )
        return self.get_response(request)
