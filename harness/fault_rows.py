"""The faults of issue 25, one function per row, each run on a deployed platform (harness.platforms)
with traffic flowing across it: callers add turns and search through the API while the fault happens.

A row returns a RowResult: processes alive afterwards, tasks enqueued / succeeded / lost, client
statuses, the API's 5xx bodies, and the seconds from the fault's end to the first task that
succeeded after it. The fault tests assert on it; `python -m bench faults` reports it."""

import http.client
import json
import threading
import time
from dataclasses import dataclass, field

from harness.processes import wait_for

ACTIVE = ("queued", "running", "failed")
# Work scheduled for later is not a row's: a topic compile waits up to TOPIC_COMPILE_AFTER_DAYS after a
# user's first new items, while retries wait seconds to minutes.
DUE = "run_after < now() + interval '1 hour'"


@dataclass
class Call:
    kind: str
    started: float
    ended: float
    status: int  # 0: no HTTP answer (connection refused or reset)
    task_ids: list = field(default_factory=list)
    error_code: str | None = None
    retry_after: str | None = None


class Traffic:
    """Adders and searchers, each waiting `pace` seconds between its calls; every call is recorded."""

    def __init__(self, platform, *, adders: int = 2, searchers: int = 1, pace: float = 0.25, tag: str = "row"):
        self.platform, self.pace, self.tag = platform, pace, tag
        self.calls: list[Call] = []
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(kind, f"{tag}-{kind}-{index}"), daemon=True)
            for kind, count in (("add", adders), ("search", searchers))
            for index in range(count)
        ]

    def __enter__(self) -> "Traffic":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _run(self, kind: str, user_id: str) -> None:
        host, port = self.platform.url.removeprefix("http://").rsplit(":", 1)
        headers = {"Authorization": f"Api-Key {self.platform.api_key}", "Content-Type": "application/json"}
        number = 0
        while not self.stopping.is_set():
            number += 1
            if kind == "add":
                path = "/api/v1/memory/add"
                body = {
                    "user_id": user_id,
                    "session_id": f"s-{user_id}",
                    "messages": [{"role": "user", "content": f"turn {number}: I moved to Lisbon last spring"}],
                }
            else:
                path = "/api/v1/memory/search"
                body = {"user_id": f"{self.tag}-add-0", "query": "where did I move", "limit": 5}
            started = time.time()
            connection = http.client.HTTPConnection(host, int(port), timeout=60)
            try:
                connection.request("POST", path, body=json.dumps(body), headers=headers)
                response = connection.getresponse()
                payload = response.read()
                call = Call(kind, started, time.time(), response.status, retry_after=response.getheader("Retry-After"))
                if response.status >= 400:
                    try:
                        call.error_code = json.loads(payload)["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        call.error_code = "(not JSON)"
                elif kind == "add":
                    call.task_ids = json.loads(payload).get("task_ids", [])
            except OSError as exc:
                call = Call(kind, started, time.time(), 0, error_code=type(exc).__name__)
            finally:
                connection.close()
            self.calls.append(call)
            self.stopping.wait(self.pace)

    def task_ids(self) -> set[str]:
        return {task_id for call in self.calls for task_id in call.task_ids}

    def accepted_adds(self) -> int:
        return sum(1 for call in self.calls if call.kind == "add" and call.status == 202)


@dataclass
class RowResult:
    row: str
    path: str
    processes: dict
    tasks_enqueued: int
    tasks_succeeded: int
    tasks_lost: int
    statuses: dict
    server_errors: dict
    recovery_seconds: float | None
    turns_accepted: int
    turns_stored: int
    notes: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return self.__dict__.copy()


def _sql_or_none(platform, query, params=()):
    try:
        return platform.sql(query, params)
    except Exception:  # the database may be the fault
        return None


def settle(platform, *, since: float, timeout: float = 120) -> tuple[int, int]:
    """Waits until no task created since `since` is still active; returns (created, succeeded)."""

    def settled():
        rows = _sql_or_none(
            platform,
            f"SELECT status, count(*) FROM pipeline_memorytask WHERE created_at >= to_timestamp(%s) AND {DUE} "
            "GROUP BY status",
            [since],
        )
        if rows is None:
            return False
        counts = dict(rows)
        return counts if not any(counts.get(status) for status in ACTIVE) else False

    try:
        counts = wait_for(settled, timeout=timeout, interval=0.5, message="every task to finish")
    except TimeoutError:
        counts = dict(
            platform.sql(
                f"SELECT status, count(*) FROM pipeline_memorytask WHERE created_at >= to_timestamp(%s) AND {DUE} "
                "GROUP BY status",
                [since],
            )
        )
    return sum(counts.values()), counts.get("succeeded", 0)


def first_success_after(platform, moment: float, *, timeout: float = 120) -> float | None:
    """Seconds from `moment` to the first task that finished successfully after it."""

    def finished():
        rows = _sql_or_none(
            platform,
            "SELECT extract(epoch FROM min(finished_at)) FROM pipeline_memorytask "
            "WHERE status = 'succeeded' AND finished_at >= to_timestamp(%s)",
            [moment],
        )
        return rows[0][0] if rows and rows[0][0] is not None else None

    try:
        return round(float(wait_for(finished, timeout=timeout, interval=0.2, message="a task to succeed")) - moment, 2)
    except TimeoutError:
        return None


def _result(row, platform, traffic: Traffic, *, since: float, fault_end: float, notes=None) -> RowResult:
    recovery = first_success_after(platform, fault_end)
    created, succeeded = settle(platform, since=since)
    turns_stored = platform.sql(
        "SELECT count(*) FROM conversations_message m JOIN conversations_session s ON s.id = m.session_id "
        "WHERE s.session_id LIKE %s",
        [f"s-{traffic.tag}-%"],
    )[0][0]
    statuses: dict = {}
    server_errors: dict = {}
    for call in traffic.calls:
        statuses[call.status] = statuses.get(call.status, 0) + 1
        if call.status == 0 or call.status >= 500:
            # "503 service_unavailable retry-after 5", "0 ConnectionRefusedError", "500 server_error" …
            key = f"{call.status} {call.error_code}" + (f" retry-after {call.retry_after}" if call.retry_after else "")
            server_errors[key] = server_errors.get(key, 0) + 1
    return RowResult(
        row=row,
        path=platform.path,
        processes=platform.processes(),
        tasks_enqueued=created,
        tasks_succeeded=succeeded,
        tasks_lost=created - succeeded,
        statuses=statuses,
        server_errors=server_errors,
        recovery_seconds=recovery,
        turns_accepted=traffic.accepted_adds(),
        turns_stored=turns_stored,
        notes={**(notes or {}), **_restarts_since_begin(platform)},
    )


def _begin(platform) -> float:
    """Marks the start of a row: its tasks are those created from now, its restarts those counted from now."""
    platform.restarts_at_begin = platform.restarts() if hasattr(platform, "restarts") else None
    return time.time()


def _restarts_since_begin(platform) -> dict:
    """runplatform's restarts of each process during the row (other paths have no supervisor)."""
    if getattr(platform, "restarts_at_begin", None) is None:
        return {}
    now = platform.restarts()
    return {"restarts": {name: count - platform.restarts_at_begin.get(name, 0) for name, count in now.items()}}


def _backlog(platform) -> int:
    return platform.sql(f"SELECT count(*) FROM pipeline_memorytask WHERE status IN ('queued', 'running') AND {DUE}")[0][
        0
    ]


def _burst(platform, traffic: Traffic, count: int) -> None:
    """`count` adds at once, so the worker has a backlog (busy, with prefetched and unacked messages);
    they count as the row's traffic."""
    with Traffic(platform, adders=count, searchers=0, pace=10, tag=f"{traffic.tag}-burst") as burst:
        wait_for(lambda: len(burst.calls) >= count, timeout=30, interval=0.05, message="the burst of adds")
    traffic.calls += burst.calls


# The rows ---------------------------------------------------------------------------------------


def redis_kill(platform, *, busy: bool, down_seconds: float = 2.0, warm_seconds: float = 2.0) -> RowResult:
    """SIGKILL Redis and start it again empty, with the worker idle or busy."""
    row = f"Redis SIGKILL and restart, worker {'busy' if busy else 'idle'}"
    tag = f"redis-{'busy' if busy else 'idle'}"
    since = _begin(platform)
    with Traffic(platform, tag=tag, adders=2 if busy else 0) as traffic:
        time.sleep(warm_seconds)
        notes = {}
        if busy:
            _burst(platform, traffic, 20)
            notes["backlog_at_fault"] = _backlog(platform)
        else:
            settle(platform, since=since, timeout=30)
        platform.redis.stop()
        time.sleep(down_seconds)
        platform.redis.start()
        fault_end = time.time()
        if not busy:
            traffic.stop()
            with Traffic(platform, tag=tag, adders=2, searchers=0) as after:
                time.sleep(warm_seconds)
            traffic.calls += after.calls
        else:
            time.sleep(warm_seconds)
    return _result(row, platform, traffic, since=since, fault_end=fault_end, notes=notes)


def redis_flap(platform, *, kills: int = 3, within_seconds: float = 30.0, down_seconds: float = 1.0) -> RowResult:
    """Redis SIGKILLed `kills` times within `within_seconds`, restarted (empty) after each."""
    since = _begin(platform)
    with Traffic(platform, tag="redis-flap") as traffic:
        time.sleep(2)
        _burst(platform, traffic, 10)
        gap = max(0.0, within_seconds / kills - down_seconds)
        for kill in range(kills):
            platform.redis.stop()
            time.sleep(down_seconds)
            platform.redis.start()
            if kill < kills - 1:
                time.sleep(gap)
        fault_end = time.time()
        time.sleep(2)
    return _result(
        "Redis flapping: 3 kills",
        platform,
        traffic,
        since=since,
        fault_end=fault_end,
        notes={"kills": kills, "within_seconds": within_seconds},
    )


def redis_pause(platform, *, pause_seconds: float = 30.0) -> RowResult:
    """Redis SIGSTOPped (a hung broker: it accepts connections and answers nothing), then continued."""
    since = _begin(platform)
    with Traffic(platform, tag="redis-pause") as traffic:
        time.sleep(2)
        platform.redis.pause()
        time.sleep(pause_seconds)
        platform.redis.resume()
        fault_end = time.time()
        time.sleep(2)
    return _result(f"Redis SIGSTOP {pause_seconds:.0f} s", platform, traffic, since=since, fault_end=fault_end)


def postgres_stop(platform, *, down_seconds: float = 10.0) -> RowResult:
    """PostgreSQL stopped (fast shutdown) and started again: the API answers a JSON 503 meanwhile."""
    since = _begin(platform)
    with Traffic(platform, tag="postgres-stop") as traffic:
        time.sleep(2)
        platform.postgres.stop()
        stopped = time.time()
        time.sleep(down_seconds)
        platform.postgres.start()
        fault_end = time.time()
        time.sleep(3)
    during = [call for call in traffic.calls if stopped <= call.started < fault_end]
    slowest = max((call.ended - call.started for call in during), default=None)
    return _result(
        f"PostgreSQL stopped {down_seconds:.0f} s",
        platform,
        traffic,
        since=since,
        fault_end=fault_end,
        notes={
            "slowest_call_during_outage_seconds": round(slowest, 2) if slowest is not None else None,
            "calls_during_outage": len(during),
        },
    )


def worker_kill(platform, *, in_flight: int = 30, replace_after_seconds: float = 10.0) -> RowResult:
    """SIGKILL the worker with `in_flight` tasks queued or running; a new worker `replace_after_seconds`
    later (on the runplatform path its supervisor brings it back on its own schedule)."""
    since = _begin(platform)
    with Traffic(platform, tag="worker-kill", adders=1, searchers=1) as traffic:
        time.sleep(1)
        _burst(platform, traffic, in_flight // 3 + 1)  # an add enqueues about three tasks
        backlog = _backlog(platform)
        platform.kill("worker")
        if platform.path == "runplatform":
            platform.replace("worker")
        else:
            time.sleep(replace_after_seconds)
            platform.replace("worker")
        fault_end = time.time()
        time.sleep(2)
    return _result(
        "worker SIGKILL with tasks in flight, a new worker after",
        platform,
        traffic,
        since=since,
        fault_end=fault_end,
        notes={"backlog_at_fault": backlog},
    )


def beat_kill(platform, *, down_seconds: float = 5.0) -> RowResult:
    """SIGKILL beat; while it is gone Redis loses what it held (so only beat's re-publish can send
    those tasks again); then beat is back. Nothing may be lost and no schedule doubled."""
    schedules_before = platform.sql("SELECT name FROM django_celery_beat_periodictask ORDER BY name")
    since = _begin(platform)
    with Traffic(platform, tag="beat-kill") as traffic:
        time.sleep(2)
        platform.kill("beat")
        platform.redis.stop()
        time.sleep(1)
        platform.redis.start()
        if platform.path != "runplatform":
            time.sleep(down_seconds)
        platform.replace("beat")
        fault_end = time.time()
        time.sleep(3)
    result = _result("beat SIGKILL and restart", platform, traffic, since=since, fault_end=fault_end)
    schedules_after = platform.sql("SELECT name FROM django_celery_beat_periodictask ORDER BY name")
    result.notes["schedules_unchanged"] = schedules_before == schedules_after
    return result
