"""A hung broker under API load: callers add turns and search through a real gunicorn while the
private redis-server is paused (SIGSTOP), then continued. Used by the fault test (a short pause,
with assertions) and by `python -m bench broker_pause` (a 10 s pause, reported)."""

import http.client
import json
import threading
import time
from dataclasses import dataclass, field

from harness.measure import percentile


@dataclass
class Call:
    kind: str  # "add" or "search"
    started: float
    ended: float
    status: int
    task_ids: list = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class PauseRun:
    calls: list
    paused_at: float
    resumed_at: float

    def during_pause(self, kind: str) -> list[Call]:
        """Calls of a kind that completed while the broker was paused."""
        return [call for call in self.calls if call.kind == kind and self.paused_at <= call.ended < self.resumed_at]

    def started_during_pause(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind and self.paused_at <= call.started < self.resumed_at]

    def task_ids(self) -> set[str]:
        return {task_id for call in self.calls for task_id in call.task_ids}

    def summary(self) -> dict:
        # Latencies of the calls that started during the pause, including any that ended after it.
        searches = [call.seconds for call in self.started_during_pause("search")]
        adds = self.started_during_pause("add")
        before = [call.seconds for call in self.calls if call.kind == "search" and call.ended < self.paused_at]
        return {
            "pause_seconds": round(self.resumed_at - self.paused_at, 2),
            "search_p95_ms_before_pause": round(percentile(before, 0.95) * 1000, 1) if before else None,
            "completed_during_pause": len(self.during_pause("add")) + len(self.during_pause("search")),
            "adds_completed_during_pause": len(self.during_pause("add")),
            "searches_completed_during_pause": len(self.during_pause("search")),
            "search_p50_ms_started_during_pause": round(percentile(searches, 0.5) * 1000, 1) if searches else None,
            "search_p95_ms_started_during_pause": round(percentile(searches, 0.95) * 1000, 1) if searches else None,
            "adds_started_during_pause": len(adds),
            "add_max_ms_started_during_pause": round(max(call.seconds for call in adds) * 1000, 1) if adds else None,
            "add_statuses": sorted({call.status for call in self.calls if call.kind == "add"}),
            "search_statuses": sorted({call.status for call in self.calls if call.kind == "search"}),
        }


class _Caller(threading.Thread):
    def __init__(
        self, *, port: int, api_key: str, kind: str, user_id: str, pace: float, stop: threading.Event, calls: list
    ):
        super().__init__(daemon=True, name=f"{kind}-{user_id}")
        self.port, self.api_key, self.kind, self.user_id, self.pace = port, api_key, kind, user_id, pace
        self.stop, self.calls = stop, calls
        self.error: BaseException | None = None

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Authorization": f"Api-Key {self.api_key}", "Content-Type": "application/json"}
        number = 0
        try:
            while not self.stop.is_set():
                number += 1
                if self.kind == "add":
                    path = "/api/v1/memory/add"
                    body = {
                        "user_id": self.user_id,
                        "session_id": f"pause-{self.user_id}",
                        "messages": [{"role": "user", "content": f"turn {number}: I moved to Lisbon last spring"}],
                    }
                else:
                    path = "/api/v1/memory/search"
                    body = {"user_id": self.user_id, "query": "where did I move", "limit": 5}
                started = time.monotonic()
                connection.request("POST", path, body=json.dumps(body), headers=headers)
                response = connection.getresponse()
                payload = response.read()
                ended = time.monotonic()
                task_ids = (
                    json.loads(payload).get("task_ids", []) if self.kind == "add" and response.status == 202 else []
                )
                self.calls.append(Call(self.kind, started, ended, response.status, task_ids))
                self.stop.wait(self.pace)
        except BaseException as exc:  # reported by run_pause
            self.error = exc
        finally:
            connection.close()


def run_pause(
    *,
    server,
    redis_server,
    api_key: str,
    pause_seconds: float,
    adders: int = 8,
    searchers: int = 4,
    pace: float = 0.1,
    warm_up_seconds: float = 2.0,
    cool_down_seconds: float = 1.0,
) -> PauseRun:
    """Callers add and search (each waiting `pace` seconds between its calls) for `warm_up_seconds`,
    through a pause of the broker, and for `cool_down_seconds` after it; every call is recorded.

    More adders than the server has threads: if an add waits for the broker, they take every thread."""
    calls: list[Call] = []
    stop = threading.Event()
    callers = [
        _Caller(
            port=server.port, api_key=api_key, kind=kind, user_id=f"{kind}-{index}", pace=pace, stop=stop, calls=calls
        )
        for kind, count in (("add", adders), ("search", searchers))
        for index in range(count)
    ]
    for caller in callers:
        caller.start()
    try:
        time.sleep(warm_up_seconds)
        paused_at = time.monotonic()
        redis_server.pause()
        time.sleep(pause_seconds)
    finally:
        resumed_at = time.monotonic()
        redis_server.resume()
    time.sleep(cool_down_seconds)
    stop.set()
    for caller in callers:
        caller.join(timeout=150)
    errors = [caller.error for caller in callers if caller.error is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} caller(s) failed: {errors[0]!r}")
    return PauseRun(calls=calls, paused_at=paused_at, resumed_at=resumed_at)
