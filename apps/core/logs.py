"""The log filter on every handler: log lines carry ids, routes and error classes, never user content
(exception messages are withheld unless their source is the machinery, request paths become routes)."""

import logging
import traceback

WITHHELD = "(message withheld: it may quote user data)"
REQUEST_LOGGERS = ("django.request", "django.server", "django.security")
ASGI_ROUTES = ("/mcp", "/healthz")


def request_route(request) -> str:
    """The URL pattern a request matched ("/api/v1/sessions/<str:session_id>/"), never its path."""
    match = getattr(request, "resolver_match", None)
    return _route(_resolve(getattr(request, "path_info", "")) if match is None else match)


def path_route(path: str) -> str:
    return _route(_resolve(path))


def _route(match) -> str:
    return f"/{match.route}" if match is not None and match.route else "(no route)"


def asgi_route(path_and_query: str) -> str:
    """The path of a request uvicorn answered when it is one of ASGI_ROUTES, never the query string."""
    path = path_and_query.split("?", 1)[0]
    return path if path.rstrip("/") in ASGI_ROUTES else "(no route)"


def _resolve(path: str):
    from django.urls import Resolver404, resolve

    try:
        return resolve(path)
    except (Resolver404, ValueError):
        return None


def error_class(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


# Exceptions (and subclasses) whose message describes a connection, a timeout or the configuration,
# never a request's data, and which an operator needs. Named, not imported: each library is optional.
READABLE = frozenset(
    {
        "builtins.ConnectionError",  # ConnectionRefusedError, ConnectionResetError, BrokenPipeError …
        "builtins.TimeoutError",
        "socket.gaierror",
        "redis.exceptions.ConnectionError",
        "redis.exceptions.TimeoutError",
        "redis.exceptions.BusyLoadingError",
        "kombu.exceptions.OperationalError",
        "amqp.exceptions.ConnectionError",
        "billiard.exceptions.WorkerLostError",
        "celery.exceptions.TimeLimitExceeded",
        "celery.exceptions.SoftTimeLimitExceeded",
        # Connection and server state errors; their first line says what happened to the connection.
        # IntegrityError, DataError and ProgrammingError (which quote rows and statements) are not here.
        "psycopg.OperationalError",
        "psycopg.InterfaceError",
        "django.db.utils.OperationalError",
        "django.db.utils.InterfaceError",
        "django.core.exceptions.ImproperlyConfigured",
        "openai.APIConnectionError",  # includes APITimeoutError
    }
)
# Readable only when raised inside a dependency (its message names types and attributes of that
# library's code, as kombu's "'NoneType' object has no attribute 'client'" did).
READABLE_FROM_DEPENDENCIES = frozenset({"builtins.AttributeError"})
DEPENDENCY_MARKERS = ("/site-packages/", "/dist-packages/")


def _raised_in_dependency(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and any(marker in frames[-1].filename for marker in DEPENDENCY_MARKERS)


def readable_message(exc: BaseException) -> str | None:
    """The message when its source makes it safe to log; only the first line (DETAIL and HINT may quote a row)."""
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__}
    if names & READABLE or (names & READABLE_FROM_DEPENDENCIES and _raised_in_dependency(exc)):
        message = str(exc).strip().split("\n", 1)[0]
        return message[:500] or None
    return None


def describe_exception(exc: BaseException) -> str:
    """A traceback of every chained exception, with messages only where readable_message allows."""
    chain, seen, current = [], set(), exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        else:
            current = None if current.__suppress_context__ else current.__context__
    parts = []
    for index, item in enumerate(reversed(chain)):
        if index:
            parts.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if item.__cause__ is not None
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        frames = "".join(traceback.format_list(traceback.extract_tb(item.__traceback__)))
        line = f"{error_class(item)}: {readable_message(item) or WITHHELD}"
        parts.append(f"Traceback (most recent call last):\n{frames}{line}\n")
    return "".join(parts).rstrip("\n")


def _safe(value):
    if not isinstance(value, BaseException):
        return value
    message = readable_message(value)
    return f"{error_class(value)}: {message}" if message else error_class(value)


class RedactUserContent(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = describe_exception(record.exc_info[1])
            record.exc_info = None
        if isinstance(record.args, dict):
            record.args = {key: _safe(value) for key, value in record.args.items()}
        elif isinstance(record.args, tuple):
            record.args = tuple(_safe(value) for value in record.args)
        if record.name in REQUEST_LOGGERS:
            self._request_line(record)
        elif record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) >= 3:
            # uvicorn logs '%s - "%s %s HTTP/%s" %d' with the path and its query string (which may carry a key).
            record.args = (*record.args[:2], asgi_route(str(record.args[2])), *record.args[3:])
        return True

    @staticmethod
    def _request_line(record: logging.LogRecord) -> None:
        request = getattr(record, "request", None)
        if request is not None and hasattr(request, "path"):
            route = request_route(request)
            # django.request logs "%s: %s" % (reason, request.path); keep the reason, swap the path.
            record.args = tuple(route if arg == request.path else arg for arg in (record.args or ()))
            if request.path in record.msg:
                record.msg = record.msg.replace(request.path, route)
        elif record.name == "django.server":
            # runserver logs the request line; only its route is kept.
            record.msg, record.args = "%s", (_server_line(record),)


def _server_line(record: logging.LogRecord) -> str:
    request_line = str(record.args[0]) if record.args else ""
    method, _, rest = request_line.partition(" ")
    path = rest.split(" ", 1)[0].split("?", 1)[0]
    status = record.args[1] if record.args and len(record.args) > 1 else "-"
    return f"{method} {path_route(path)} {status}"
