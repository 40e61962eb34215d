"""Slow clients against the real web server (gunicorn with gunicorn.conf.py, as every deploy path
runs it): trickled headers and bodies hold neither the application nor each other's tenants."""

import http.client
import json
import socket
import threading
import time

import pytest

from harness.processes import web_on_private_redis

HEADER_TIMEOUT, BODY_TIMEOUT = 2, 2


@pytest.fixture
def web(transactional_db, tmp_path):
    with web_on_private_redis(
        tmp_path / "web.log",
        workers=1,
        env={
            "LOG_LEVEL": "ERROR",
            "WEB_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
            "REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
            "WEB_REQUESTS_PER_WORKER": "2",
        },
    ) as (server, _):
        yield server


def _open(port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    sock.sendall(head)
    return sock


def _body_head(length: int) -> bytes:
    return (
        b"POST /api/v1/memory/add HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % length
    )


def _trickle(port: int, *, body: bool, stop: threading.Event) -> None:
    """Sends a byte every 0.2 s, reconnecting whenever the server hangs up, until told to stop."""
    while not stop.is_set():
        try:
            with _open(port, _body_head(100000) if body else b"GET /api/v1/me HTTP/1.1\r\n") as sock:
                while not stop.is_set():
                    sock.sendall(b"x" if not body else b" ")
                    time.sleep(0.2)
        except OSError:
            time.sleep(0.05)


def test_trickling_clients_do_not_starve_other_requests(web, client_a):
    """With the old gthread worker (1 process x 2 threads here) two slow sockets were enough to
    make every other request wait; here eight trickle for the whole test."""
    stop = threading.Event()
    tricklers = [
        threading.Thread(target=_trickle, args=(web.port,), kwargs={"body": n % 2 == 1, "stop": stop}) for n in range(8)
    ]
    for thread in tricklers:
        thread.start()
    try:
        time.sleep(0.5)
        statuses = []
        for _ in range(6):
            conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
            conn.request("GET", "/api/v1/me", headers={"Authorization": f"Api-Key {client_a.raw_key}"})
            statuses.append(conn.getresponse().status)
            conn.close()
    finally:
        stop.set()
        for thread in tricklers:
            thread.join()

    assert statuses == [200] * 6


def test_a_body_slower_than_the_timeout_is_answered_408(web, client_a):
    with _open(web.port, _body_head(100) + b'{"user_id": ') as sock:
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = json.loads(response.read())

    assert response.status == 408
    assert body["error"]["code"] == "request_timeout"
    assert f"{BODY_TIMEOUT} seconds" in body["error"]["message"]


def test_headers_slower_than_the_timeout_are_hung_up_on(web):
    with _open(web.port, b"GET /api/v1/me HTTP/1.1\r\nHost: 127.0.0.1\r\n") as sock:
        received = sock.recv(1024)  # the socket's own timeout (15 s) fails the test if nobody hangs up

    assert received == b""  # closed without an answer
