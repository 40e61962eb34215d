"""A reverse proxy on a real socket in front of the live server, told how to misbehave: the SDK's
retries are tested against real 503s, 429s and dropped connections, not mocks."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2 as httpx

FORWARDED_HEADERS = ("Authorization", "X-API-Key", "Content-Type", "Accept", "Idempotency-Key")


class FaultyProxy:
    """Each request takes the next action of `plan` (then "forward"):
    - "forward": pass it to the live server and its answer back;
    - "503": answer 503 with an HTML page, as a load balancer does while the app restarts;
    - "429": answer 429 with `Retry-After: 1`;
    - "drop": close the connection without answering;
    - "forward-then-503": pass it on, then lose the answer behind a 503 (the work was done)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.plan: list[str] = []
        self.seen: list[tuple[str, str, str | None]] = []
        self._http = httpx.Client(timeout=30)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="faulty-proxy")
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> "FaultyProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    def _next_action(self) -> str:
        return self.plan.pop(0) if self.plan else "forward"

    def _handler_class(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: bytes, content_type: str, extra: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, body: bytes) -> httpx.Response:
                headers = {name: self.headers[name] for name in FORWARDED_HEADERS if self.headers.get(name)}
                return proxy._http.request(self.command, proxy.upstream + self.path, headers=headers, content=body)

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.seen.append((self.command, self.path, self.headers.get("Idempotency-Key")))
                action = proxy._next_action()
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "503" or action == "forward-then-503":
                    if action == "forward-then-503":
                        self._forward(body)
                    self._answer(503, b"<html><body>503 Service Unavailable</body></html>", "text/html")
                    return
                if action == "429":
                    error = b'{"error": {"status": 429, "code": "throttled", "message": "Slow down."}}'
                    self._answer(429, error, "application/json", {"Retry-After": "1"})
                    return
                upstream = self._forward(body)
                self._answer(upstream.status_code, upstream.content, upstream.headers.get("Content-Type", "text/plain"))

            do_GET = do_POST = do_PATCH = do_DELETE = _handle

        return Handler
