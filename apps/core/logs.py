"""Log lines carry ids, routes and error classes, never user content.

Exception messages are where user values leak (a database error quotes the row it refused, a
validation error the value it disliked), and so are request paths (session and user ids). The
filter below is installed on every log handler (settings.LOGGING, Celery's handlers): it replaces
a traceback's messages with the exception classes, exceptions passed as arguments with their class
names, and the path in Django's request log lines with the route the request matched.
"""

import logging
import traceback

WITHHELD = "(message withheld: it may quote user data)"
REQUEST_LOGGERS = ("django.request", "django.server", "django.security")


def request_route(request) -> str:
    """The URL pattern a request matched ("/api/v1/sessions/<str:session_id>/"), never its path."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        match = _resolve(getattr(request, "path_info", ""))
    return f"/{match.route}" if match is not None and match.route else "(no route)"


def path_route(path: str) -> str:
    match = _resolve(path)
    return f"/{match.route}" if match is not None and match.route else "(no route)"


def _resolve(path: str):
    from django.urls import Resolver404, resolve

    try:
        return resolve(path)
    except (Resolver404, ValueError):
        return None


def error_class(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def describe_exception(exc: BaseException) -> str:
    """A traceback with every frame (file, line, function, code) and every chained exception's
    class, and none of their messages."""
    chain, seen, current = [], set(), exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            current = current.__context__
        else:
            current = None
    parts = []
    for index, item in enumerate(reversed(chain)):
        if index:
            cause = item.__cause__ is not None
            parts.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if cause
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        frames = "".join(traceback.format_list(traceback.extract_tb(item.__traceback__)))
        parts.append(f"Traceback (most recent call last):\n{frames}{error_class(item)}: {WITHHELD}\n")
    return "".join(parts).rstrip("\n")


def _safe(value):
    return error_class(value) if isinstance(value, BaseException) else value


class RedactUserContent(logging.Filter):
    """Rewrites each record so that what the handler writes holds no user content (see the module)."""

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
