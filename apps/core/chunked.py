"""Request bodies sent with `Transfer-Encoding: chunked` (no Content-Length).

Django reads exactly CONTENT_LENGTH bytes of a body, so a chunked body would be read as empty and
answered with a misleading "field required". When the server has already de-chunked the body and
marks the end of the stream (`wsgi.input_terminated`, as gunicorn does), it is read here, up to the
body limit, and handed on with its length; a server that cannot do that is answered 411.
"""

import io
import json

from django.conf import settings

from apps.core.errors import error_body


def _json_response(start_response, status: str, status_code: int, code: str, message: str):
    payload = json.dumps(error_body(status_code=status_code, code=code, message=message)).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]


class ChunkedBodies:
    """WSGI middleware around the Django application."""

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if not chunked or environ.get("CONTENT_LENGTH"):
            return self.application(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            return _json_response(
                start_response, "411 Length Required", 411, "length_required",
                "This server needs a Content-Length header; send the body without chunked transfer encoding.",
            )
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        body = environ["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            return _json_response(
                start_response, "413 Request Entity Too Large", 413, "payload_too_large",
                "The request body is larger than the limit.",
            )
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.application(environ, start_response)
