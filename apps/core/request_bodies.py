"""WSGI middleware: a body is read in full (de-chunked, within REQUEST_BODY_TIMEOUT_SECONDS) before Django
runs, so a slow client holds no slot; few requests per process and per API key run the application at once."""

import contextlib
import hashlib
import io
import json
import sys
import threading

from django.conf import settings

from apps.core.errors import error_body

READ_SIZE = 64 * 1024


class BodyTimeout(Exception):
    """The client did not send its body within REQUEST_BODY_TIMEOUT_SECONDS."""


def _json_response(start_response, status: str, code: str, message: str):
    payload = json.dumps(error_body(status_code=int(status.split()[0]), code=code, message=message)).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]


def _deadline(seconds: float):
    """Interrupts a read that outlasts `seconds`. Only a cooperative server can interrupt a blocked
    read; under a threaded one (runserver, the test client) reading first still holds a thread."""
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is not None and gevent_monkey.is_module_patched("socket"):
        import gevent

        return gevent.Timeout(seconds, BodyTimeout)
    return contextlib.nullcontext()


def _read(stream, limit: int) -> bytes:
    parts, size = [], 0
    while size < limit:
        part = stream.read(min(READ_SIZE, limit - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


class RequestBodies:
    def __init__(self, application, *, slots: int, slots_per_key: int):
        self.application = application
        self.slots = threading.BoundedSemaphore(slots)
        self.slots_per_key = slots_per_key
        self.key_slots: dict[str, list] = {}  # key digest -> [semaphore, requests holding or awaiting it]
        self.key_slots_lock = threading.Lock()

    @contextlib.contextmanager
    def _key_slot(self, environ):
        """A client sending many requests at once queues behind itself, not other tenants."""
        key = environ.get("HTTP_AUTHORIZATION") or environ.get("HTTP_X_API_KEY")
        if not key:
            yield
            return
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        with self.key_slots_lock:
            entry = self.key_slots.setdefault(digest, [threading.BoundedSemaphore(self.slots_per_key), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self.key_slots_lock:
                entry[1] -= 1
                if not entry[1]:
                    del self.key_slots[digest]

    def __call__(self, environ, start_response):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        length = environ.get("CONTENT_LENGTH") or ""
        # Django reads exactly CONTENT_LENGTH bytes: a chunked body would read as empty ("field required").
        if chunked and not length and not environ.get("wsgi.input_terminated"):
            return _json_response(
                start_response,
                "411 Length Required",
                "length_required",
                "This server needs a Content-Length header; send the body without chunked transfer encoding.",
            )
        # A declared length over the limit is left to Django, which refuses it (413) without reading.
        declared = int(length) if length.isdigit() else 0
        if (chunked and not length) or 0 < declared <= limit:
            try:
                with _deadline(settings.REQUEST_BODY_TIMEOUT_SECONDS):
                    body = _read(environ["wsgi.input"], limit + 1 if chunked else declared)
            except BodyTimeout:
                return _json_response(
                    start_response,
                    "408 Request Timeout",
                    "request_timeout",
                    f"The request body did not arrive within {settings.REQUEST_BODY_TIMEOUT_SECONDS:g} seconds.",
                )
            if len(body) > limit:
                return _json_response(
                    start_response,
                    "413 Request Entity Too Large",
                    "payload_too_large",
                    "The request body is larger than the limit.",
                )
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        with self._key_slot(environ), self.slots:
            return self.application(environ, start_response)
