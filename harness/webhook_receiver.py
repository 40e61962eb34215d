"""A real local HTTP receiver for webhook deliveries (stdlib http.server in a thread), shared by the
tests and the benchmark. It verifies each request's signature with the Standard Webhooks reference
library and can fail a share of the requests it gets."""

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class Receiver:
    """`fail_rate` of the requests (chosen by a seeded random draw) get `fail_status` and are not
    recorded as received; the others are verified (a bad signature gets 401) and kept in `received`."""

    def __init__(self, *, secret: str | None = None, fail_rate: float = 0.0, fail_status: int = 503, seed: int = 40):
        self.secret, self.fail_rate, self.fail_status = secret, fail_rate, fail_status
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.received: list[dict] = []  # {"headers", "body", "payload", "at"}
        self.requests = 0
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.answer(dict(self.headers), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def answer(self, headers: dict, body: bytes) -> int:
        with self.lock:
            self.requests += 1
            if self.random.random() < self.fail_rate:
                return self.fail_status
            if self.secret is not None:
                try:
                    Webhook(self.secret).verify(body, {name.lower(): value for name, value in headers.items()})
                except WebhookVerificationError:
                    self.refused += 1
                    return 401
            self.received.append({"headers": headers, "body": body, "payload": json.loads(body), "at": time.time()})
            return 200

    def event_ids(self) -> list[str]:
        with self.lock:
            return [item["payload"]["id"] for item in self.received]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
