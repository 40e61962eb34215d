"""Slow and greedy clients (issue 26): can a few bad connections starve another tenant?

Slow: 12 sockets trickle a request for BENCH_SLOW_SECONDS (60) — 6 send their headers a byte a
second, 6 send complete headers and then their body a byte a second, each reconnecting when the
server hangs up — while another tenant calls `GET /api/v1/me` and `POST /api/v1/memory/search` in
a loop (20 s client timeout). Measured against the web server as it was (gunicorn, gthread, 2
workers x 4 threads) and as it is now (gunicorn.conf.py, the command `make run` and compose use);
the result is that tenant's latency p50/p95/max and its timeouts, before and after.

Greedy: one client sends BENCH_BURST (300) searches, 50 at a time, to the current server, once
without a limit and once with a limit of BENCH_BURST_LIMIT (60) requests a minute; answers counted
by status, `Retry-After` checked on every 429, and the other tenant's `/me` latency meanwhile.

Everything runs against this machine only (127.0.0.1), with a private redis-server as broker and
rate-limit store, and stops by itself. `python -m bench privacy_slow_clients` (a row of
`python -m bench privacy`).
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import Stopwatch, percentile, write_result
from harness.processes import RedisServer, free_port, wait_for

BASE_DIR = Path(__file__).resolve().parents[2]
SLOW_SOCKETS = 12
CLIENT_TIMEOUT = 20.0


def _call(port: int, method: str, path: str, api_key: str, body: dict | None = None) -> http.client.HTTPResponse:
    """One request on a fresh connection (as most agents' clients make them), its response read."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    headers = {"Authorization": f"Api-Key {api_key}", "Content-Type": "application/json"}
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        response.body = response.read()
        return response
    finally:
        connection.close()


def _timed(port: int, method: str, path: str, api_key: str, body: dict | None = None) -> dict:
    with Stopwatch() as watch:
        try:
            status = _call(port, method, path, api_key, body).status
        except TimeoutError:
            status = "timeout"
        except OSError as exc:
            status = type(exc).__name__
    return {"seconds": watch.seconds, "status": status}


def _serve(*, port: int, broker_url: str, before: bool) -> subprocess.Popen:
    from memory_platform.embedded_db import ATTACH_ENV

    gunicorn = os.path.join(os.path.dirname(sys.executable), "gunicorn")
    env = dict(
        os.environ,
        **{ATTACH_ENV: "1", "REDIS_URL": broker_url, "CELERY_BROKER_URL": broker_url, "LOG_LEVEL": "WARNING"},
        PYTHONPATH=str(BASE_DIR),
    )
    if before:
        # The old command, from a folder without gunicorn.conf.py, so none of it applies.
        command = [gunicorn, "memory_platform.wsgi", "--worker-class", "gthread", "--workers", "2", "--threads", "4"]
        cwd = "/"
    else:
        command = [gunicorn, "memory_platform.wsgi", "--access-logfile", "/dev/null"]
        cwd = BASE_DIR
    return subprocess.Popen(
        [*command, "--bind", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=cwd,
        env=env,
        start_new_session=True,
    )


def _trickle(port: int, deadline: float, *, body: bool, stats: dict, lock: threading.Lock) -> None:
    """One slow client until the deadline: a byte a second, reconnecting whenever the server closes."""
    if body:
        payload = b'{"user_id": "u", "session_id": "s", "messages": []}' + b" " * 10000
        head = (
            b"POST /api/v1/memory/add HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(payload)
        )
        slow = payload
    else:
        head = b""
        slow = b"GET /api/v1/me HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Padding: " + b"a" * 10000 + b"\r\n\r\n"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                with lock:
                    stats["connections"] += 1
                sock.sendall(head)
                for index in range(len(slow)):
                    if time.monotonic() >= deadline:
                        return
                    sock.sendall(slow[index : index + 1])
                    time.sleep(1.0)
        except OSError:
            with lock:
                stats["dropped_by_server"] += 1
            time.sleep(0.2)


def _victim(port: int, api_key: str, deadline: float) -> list[dict]:
    calls, turn = [], 0
    while time.monotonic() < deadline:
        turn += 1
        if turn % 2:
            calls.append(_timed(port, "GET", "/api/v1/me", api_key))
        else:
            calls.append(
                _timed(port, "POST", "/api/v1/memory/search", api_key, {"query": "lisbon", "user_id": "victim"})
            )
        time.sleep(0.25)
    return calls


def _summary(calls: list[dict]) -> dict:
    seconds = [call["seconds"] for call in calls]
    statuses = {}
    for call in calls:
        statuses[str(call["status"])] = statuses.get(str(call["status"]), 0) + 1
    return {
        "requests": len(calls),
        "statuses": statuses,
        "timeouts": statuses.get("timeout", 0),
        "p50_seconds": round(percentile(seconds, 0.5), 3),
        "p95_seconds": round(percentile(seconds, 0.95), 3),
        "max_seconds": round(max(seconds), 3),
    }


def _wait_until_up(port: int, process: subprocess.Popen) -> None:
    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"the web server exited with {process.returncode}")
        try:
            return _call(port, "GET", "/healthz", "").status == 200
        except OSError:
            return False

    wait_for(answers, timeout=60, message="the web server")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _slow_run(*, before: bool, broker_url: str, api_key: str, seconds: float) -> dict:
    port = free_port()
    process = _serve(port=port, broker_url=broker_url, before=before)
    try:
        _wait_until_up(port, process)
        quiet = _summary(_victim(port, api_key, time.monotonic() + 5))
        deadline = time.monotonic() + seconds
        stats, lock = {"connections": 0, "dropped_by_server": 0}, threading.Lock()
        attackers = [
            threading.Thread(
                target=_trickle, args=(port, deadline), kwargs={"body": n % 2 == 1, "stats": stats, "lock": lock}
            )
            for n in range(SLOW_SOCKETS)
        ]
        for thread in attackers:
            thread.start()
        time.sleep(2)  # let every slow socket get in first
        attacked = _summary(_victim(port, api_key, deadline))
        for thread in attackers:
            thread.join()
        return {"quiet": quiet, "under_slow_clients": attacked, "slow_connections": stats}
    finally:
        _stop(process)


def _burst(*, port: int, greedy_key: str, victim_key: str, requests: int) -> dict:
    """`requests` searches by the greedy client, 50 at a time, while the victim calls /me."""
    stop = threading.Event()
    victim_calls = []
    search = {"query": "what did the user say about flights", "user_id": "greedy"}

    def victim():
        while not stop.is_set():
            victim_calls.append(_timed(port, "GET", "/api/v1/me", victim_key))
            time.sleep(0.1)

    def greedy(_):
        try:
            response = _call(port, "POST", "/api/v1/memory/search", greedy_key, search)
        except OSError as exc:
            return type(exc).__name__, None, None
        body = json.loads(response.body) if response.status == 429 else None
        return response.status, response.getheader("Retry-After"), body

    watcher = threading.Thread(target=victim)
    watcher.start()
    with Stopwatch() as watch, ThreadPoolExecutor(50) as pool:
        outcomes = list(pool.map(greedy, range(requests)))
    stop.set()
    watcher.join()
    statuses = {}
    for status, _, _ in outcomes:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    throttled = [(retry_after, body) for status, retry_after, body in outcomes if status == 429]
    return {
        "requests": requests,
        "seconds": round(watch.seconds, 2),
        "statuses": statuses,
        "server_errors": sum(count for status, count in statuses.items() if status.startswith("5")),
        "throttled_with_retry_after": sum(1 for retry_after, _ in throttled if retry_after and retry_after.isdigit()),
        "throttled_body_example": throttled[0][1] if throttled else None,
        "other_tenant_me": _summary(victim_calls),
    }


def _bursts(*, broker_url: str, limited_key: str, unlimited_key: str, victim_key: str, requests: int) -> dict:
    port = free_port()
    process = _serve(port=port, broker_url=broker_url, before=False)
    try:
        _wait_until_up(port, process)
        return {
            "without_limit": _burst(port=port, greedy_key=unlimited_key, victim_key=victim_key, requests=requests),
            "with_limit": _burst(port=port, greedy_key=limited_key, victim_key=victim_key, requests=requests),
        }
    finally:
        _stop(process)


def run(output_dir: Path) -> dict:
    from apps.tenancy.services import client_create, organization_create

    seconds = float(os.environ.get("BENCH_SLOW_SECONDS", "60"))
    burst = int(os.environ.get("BENCH_BURST", "300"))
    burst_limit = int(os.environ.get("BENCH_BURST_LIMIT", "60"))
    tag = uuid.uuid4().hex[:8]
    victim_org = organization_create(name=f"bench-victim-{tag}")
    _, victim_key = client_create(organization=victim_org, name="victim", write_scope="victim")
    greedy_org = organization_create(name=f"bench-greedy-{tag}")
    _, limited_key = client_create(
        organization=greedy_org, name="greedy", write_scope="greedy", requests_per_minute=burst_limit
    )
    _, unlimited_key = client_create(
        organization=greedy_org, name="greedy-unlimited", write_scope="greedy", requests_per_minute=0
    )

    redis_server = RedisServer().start()
    try:
        result = {
            "slow_sockets": SLOW_SOCKETS,
            "slow_seconds": seconds,
            "before": _slow_run(before=True, broker_url=redis_server.url, api_key=victim_key, seconds=seconds),
            "after": _slow_run(before=False, broker_url=redis_server.url, api_key=victim_key, seconds=seconds),
            "burst": _bursts(
                broker_url=redis_server.url,
                limited_key=limited_key,
                unlimited_key=unlimited_key,
                victim_key=victim_key,
                requests=burst,
            )
            | {"limit_per_minute": burst_limit},
        }
    finally:
        redis_server.stop()
    before, after = result["before"]["under_slow_clients"], result["after"]["under_slow_clients"]
    result["p95_before_over_after"] = round(before["p95_seconds"] / after["p95_seconds"], 1)
    bursts = result["burst"]
    result["burst_other_tenant_p95_without_over_with_limit"] = round(
        bursts["without_limit"]["other_tenant_me"]["p95_seconds"]
        / bursts["with_limit"]["other_tenant_me"]["p95_seconds"],
        1,
    )
    write_result(output_dir, "privacy_slow_clients", result)
    print(json.dumps(result, indent=2))
    return result
