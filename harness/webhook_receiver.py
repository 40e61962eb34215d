"""A real local HTTP receiver for webhook deliveries (stdlib http.server in a thread), shared by the
tests and the benchmark. It verifies each request's signature with the Standard Webhooks reference
library and can fail a share of the requests it gets. Beside it, raw TCP listeners that misbehave
(trickle, answer a huge body, do not speak HTTP)."""

import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# Host spellings of an address on this machine or its private networks; `{port}` is a loopback listener's.
LOOPBACK_SPELLINGS = [
    "127.0.0.1:{port}",
    "localhost:{port}",
    "LocalHost:{port}",
    f"{socket.gethostname()}:{{port}}",  # a hosts-file name (this machine's: 127.0.0.1 here)
    "2130706433:{port}",
    "0x7f000001:{port}",
    "0177.0.0.1:{port}",
    "127.1:{port}",
    "127.0.0.2:{port}",
    "0.0.0.0:{port}",
    "[::1]:{port}",
    "[::ffff:127.0.0.1]:{port}",
    "[::ffff:7f00:1]:{port}",
]
INTERNAL_SPELLINGS = [
    *LOOPBACK_SPELLINGS,
    "[2002:7f00:1::]:{port}",  # 6to4 carrying 127.0.0.1
    "[64:ff9b::7f00:1]:{port}",  # NAT64 carrying 127.0.0.1
    "[::]:{port}",
    "10.0.0.1:{port}",
    "172.16.0.1:{port}",
    "192.168.1.1:{port}",
    "169.254.169.254:{port}",  # cloud metadata
    "100.64.0.1:{port}",
    "[fe80::1]:{port}",
    "[fd00::1]:{port}",
    "224.0.0.1:{port}",
    "255.255.255.255:{port}",
    "240.0.0.1:{port}",
]


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


class RawListener:
    """A TCP listener on 127.0.0.1 whose every connection is served by `answer(connection)` in a thread of
    its own: the misbehaving receivers below. `sent` records, per connection, the bytes the answer wrote
    before it finished or the client hung up; `hung_up` counts the connections the client closed first."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.lock = threading.Lock()
        self.sent: list[int] = []
        self.hung_up = 0
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        written = [0]

        def send(data: bytes) -> None:
            connection.sendall(data)
            written[0] += len(data)

        try:
            connection.settimeout(5)
            connection.recv(65536)  # the request (small: one delivery)
            self.answer(send, self.stopping)
        except (BrokenPipeError, ConnectionResetError):
            with self.lock:
                self.hung_up += 1
        except OSError:
            pass
        finally:
            with self.lock:
                self.sent.append(written[0])
            connection.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.sock.close()


def trickle_headers(*, interval: float = 0.1, seconds: float = 30.0):
    """200 OK, then header bytes one every `interval` seconds: an answer that never ends in time."""

    def answer(send, stopping):
        send(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stopping.is_set():
            send(b"a")
            time.sleep(interval)

    return answer


def trickle_body(*, interval: float = 0.1, seconds: float = 30.0):
    """200 OK with its headers at once, then the body a byte every `interval` seconds."""

    def answer(send, stopping):
        send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stopping.is_set():
            send(b"a")
            time.sleep(interval)

    return answer


def huge_body(*, megabytes: int = 96):
    """200 OK with a body of `megabytes`, written as fast as the client reads."""

    def answer(send, stopping):
        send(f"HTTP/1.1 200 OK\r\nContent-Length: {megabytes * 1024 * 1024}\r\n\r\n".encode())
        chunk = b"\0" * 65536
        for _ in range(megabytes * 16):
            if stopping.is_set():
                return
            send(chunk)

    return answer


def not_http(send, stopping):
    """A service that does not speak HTTP (an SSH banner), then hangs up."""
    send(b"SSH-2.0-OpenSSH_9.6\r\n")


def status_only(status: int, headers: str = ""):
    def answer(send, stopping):
        send(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n{headers}\r\n".encode())

    return answer
