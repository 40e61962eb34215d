"""Claiming and running tasks: one by id, due ones in batches, or work of this process as a task row."""

import logging
import os
import random
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.core import timing
from apps.pipeline.locks import advisory_xact_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import BATCHES, ORGANIZATION_CAPS, QUEUES, NotYet, backoff_of, handler_for, queue_of
from apps.pipeline.services.broker import publish
from apps.pipeline.services.heartbeats import worker_name

logger = logging.getLogger(__name__)


ERROR_MAX_CHARS = 4000


def retry_delay(attempts: int, task_type: str | None = None) -> float:
    """Capped exponential backoff, jittered in its upper half, by the settings the task type registered."""
    base, cap = (getattr(settings, name) for name in backoff_of(task_type or ""))
    ceiling = min(cap, base * 2 ** max(0, attempts - 1))
    return random.uniform(ceiling / 2, ceiling)


_CLAIM_SET = """
    status = 'running', attempts = attempts + 1, claimed_by = %(worker)s, claimed_at = %(now)s,
    heartbeat_at = %(now)s, updated_at = %(now)s,
    timings = CASE WHEN timings ? 'first_claimed_at' THEN timings
              ELSE timings || jsonb_build_object('first_claimed_at', %(now)s::timestamptz, 'first_due_at', run_after)
              END
"""


# Held while a claim decides whether it may take compile-class work, so two claimers cannot both
# pass TASK_COMPILE_MAX_RUNNING; released when the claim commits.
COMPILE_CAP_LOCK = "pipeline:compile-cap"


def _compile_filter(*, worker: str, now) -> str:
    """The claim's extra condition: only work more urgent than COMPILE once TASK_COMPILE_MAX_RUNNING other
    live processes run compile-class work (0: no cap). Call inside the claim's transaction."""
    cap = settings.TASK_COMPILE_MAX_RUNNING
    if not cap:
        return ""
    advisory_xact_lock(COMPILE_CAP_LOCK)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT count(DISTINCT claimed_by) FROM {MemoryTask._meta.db_table}
            WHERE status = 'running' AND priority >= %s AND claimed_by <> %s AND heartbeat_at >= %s
            """,
            [MemoryTask.Priority.COMPILE, worker, now - timedelta(seconds=settings.TASK_STALE_AFTER_SECONDS)],
        )
        (running,) = cursor.fetchone()
    return "" if running < cap else f"AND priority < {int(MemoryTask.Priority.COMPILE)}"


# Held while a claim of a lane with per-organisation caps counts what runs, so two claimers cannot
# both pass a cap; released when the claim commits.
ORGANIZATION_CAP_LOCK = "pipeline:organization-cap"


def _lane_filter(lane: str | None) -> tuple[str, dict]:
    """The claim's condition keeping a lane's task types: a queue's own types, or for the default lane
    every type without a queue of its own."""
    if lane is not None:
        return "AND task_type = ANY(%(lane_types)s)", {"lane_types": sorted(t for t, q in QUEUES.items() if q == lane)}
    if not QUEUES:
        return "", {}
    return "AND NOT (task_type = ANY(%(lane_types)s))", {"lane_types": sorted(QUEUES)}


def _organization_cap_filter(*, lane: str | None, now) -> tuple[str, dict]:
    """The claim's condition leaving an organisation's tasks of a capped type due while that many of them
    run in live processes (ORGANIZATION_CAPS). Call inside the claim's transaction."""
    caps = {task_type: getattr(settings, name) for task_type, name in ORGANIZATION_CAPS.items()}
    caps = {task_type: cap for task_type, cap in caps.items() if cap and QUEUES.get(task_type) == lane}
    if not caps:
        return "", {}
    advisory_xact_lock(ORGANIZATION_CAP_LOCK)
    table = MemoryTask._meta.db_table
    sql, params = "", {"cap_fresh": now - timedelta(seconds=settings.TASK_STALE_AFTER_SECONDS)}
    for index, (task_type, cap) in enumerate(sorted(caps.items())):
        sql += f"""
            AND (task_type <> %(cap_type_{index})s OR organization_id IS NULL OR (
                SELECT count(*) FROM {table} running
                WHERE running.status = 'running' AND running.task_type = %(cap_type_{index})s
                AND running.organization_id = {table}.organization_id AND running.heartbeat_at >= %(cap_fresh)s
            ) < %(cap_{index})s)"""
        params.update({f"cap_type_{index}": task_type, f"cap_{index}": cap})
    return sql, params


def _claim(*, worker: str, lane: str | None, narrowed_by: str, **params) -> list[MemoryTask]:
    """Moves the due rows of `lane` that `narrowed_by` (SQL after the WHERE) selects to running in one
    statement, skipping rows another worker is claiming. Times come from the application clock, like
    run_after, so a task is never "not yet due" because the database clock disagrees."""
    table, now = MemoryTask._meta.db_table, timezone.now()
    lane_sql, lane_params = _lane_filter(lane)
    with transaction.atomic():
        cap_sql, cap_params = _organization_cap_filter(lane=lane, now=now)
        compile_sql = _compile_filter(worker=worker, now=now) if lane is None else ""
        return list(
            MemoryTask.objects.raw(
                f"""
                UPDATE {table} SET {_CLAIM_SET}
                WHERE id IN (
                    SELECT id FROM {table}
                    WHERE status IN ('queued', 'failed') AND run_after <= %(now)s
                    {lane_sql}
                    {compile_sql}
                    {cap_sql}
                    {narrowed_by}
                    FOR UPDATE SKIP LOCKED
                )
                RETURNING *
                """,
                {"worker": worker, "now": now, **lane_params, **cap_params, **params},
            )
        )


def task_claim(*, task_id, worker: str, lane: str | None = None) -> MemoryTask | None:
    """None if it is not ours to run (a compile-class row over the compile cap stays due, as does a row of
    another lane or of an organisation at its cap)."""
    return next(iter(_claim(worker=worker, lane=lane, narrowed_by="AND id = %(id)s", id=str(task_id))), None)


def tasks_claim_due(*, worker: str, limit: int, lane: str | None = None) -> list[MemoryTask]:
    claimed = _claim(worker=worker, lane=lane, narrowed_by="ORDER BY priority, run_after LIMIT %(limit)s", limit=limit)
    return sorted(claimed, key=lambda task: (task.priority, task.run_after))


def _tasks_release(tasks: list[MemoryTask]) -> None:
    """Gives claimed tasks that have not started back to the queue, the attempt not spent."""
    MemoryTask.objects.filter(
        pk__in=[task.pk for task in tasks], status=MemoryTask.Status.RUNNING, claimed_by=tasks[0].claimed_by
    ).update(status=MemoryTask.Status.QUEUED, attempts=F("attempts") - 1, claimed_by="", updated_at=timezone.now())
    publish(task_id=tasks[0].pk, lane=queue_of(tasks[0].task_type))


class _Heartbeats:
    """One daemon thread per process refreshes heartbeat_at of the tasks running in it, so
    stale-claim recovery leaves them alone; a task costs a set insertion, not a thread."""

    def __init__(self):
        self.running: set = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.pid: int | None = None
        self.wake = threading.Event()

    def add(self, task_id) -> None:
        with self.lock:
            self.running.add(task_id)
            self.wake.set()  # the interval may have changed since the thread went to sleep
            # A forked worker does not inherit its parent's thread: start one per process.
            if self.thread is None or not self.thread.is_alive() or self.pid != os.getpid():
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self._beat, daemon=True, name="task-heartbeats")
                self.thread.start()

    def remove(self, task_id) -> None:
        with self.lock:
            self.running.discard(task_id)

    def _beat(self) -> None:
        last = time.monotonic()
        while True:
            self.wake.wait(settings.TASK_HEARTBEAT_SECONDS)
            self.wake.clear()
            if time.monotonic() - last < settings.TASK_HEARTBEAT_SECONDS:
                continue
            last = time.monotonic()
            with self.lock:
                task_ids = list(self.running)
            if not task_ids:
                continue
            try:
                MemoryTask.objects.filter(pk__in=task_ids, status=MemoryTask.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
            except Exception:  # a lost connection must not end the heartbeats; the next beat retries
                logger.exception("could not refresh task heartbeats")
            finally:
                # One short connection per beat: an idle one would outlive its database (tests).
                connection.close()


_heartbeats = _Heartbeats()


def _timed_sql(execute, sql, params, many, context):
    with timing.timed("sql"):
        return execute(sql, params, many, context)


@contextmanager
def _timed_attempt(task: MemoryTask):
    """Adds one attempt's seconds (handler, SQL, model calls, lock waits) to task.timings."""
    started = time.perf_counter()
    with timing.account() as spent, connection.execute_wrapper(_timed_sql):
        try:
            yield
        finally:
            spent.setdefault("sql_s", 0.0)
            spent["handler_s"] = time.perf_counter() - started
            timings = task.timings = dict(task.timings or {})
            for key, seconds in spent.items():
                timings[key] = round(timings.get(key, 0.0) + seconds, 4)
            timings["_attempt_s"] = spent["handler_s"]


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"[:ERROR_MAX_CHARS]


def _finish(task: MemoryTask, **fields) -> bool:
    """Writes the outcome only if this attempt still owns the row (recovery may have taken it)."""
    fields["updated_at"] = timezone.now()
    fields["timings"] = {key: value for key, value in (task.timings or {}).items() if not key.startswith("_")}
    updated = MemoryTask.objects.filter(
        pk=task.pk, status=MemoryTask.Status.RUNNING, claimed_by=task.claimed_by, attempts=task.attempts
    ).update(**fields)
    if not updated:
        logger.warning("task %s was taken over while it ran; its outcome is discarded", task.id)
    return bool(updated)


def task_execute(*, task_id, worker: str, lane: str | None = None) -> str:
    """Runs the named task alone (an eager run inside a request); `not-claimed` if it is not ours to run."""
    task = task_claim(task_id=task_id, worker=worker, lane=lane)
    return "not-claimed" if task is None else _run_claimed(task)


def _run_with_batch(task: MemoryTask, *, worker: str, lane: str | None) -> Counter[str]:
    """Runs a claimed task; for a batched type, first claims up to the batch size of due tasks of its type
    and priority and runs their `prepare` once. `prepare` returns how many of them (the first ones) it
    took; the rest go back to the queue unstarted. A failed `prepare` is logged and each handler does
    its own work. The batch's seconds are shared equally among the tasks it took."""
    tasks = [task]
    if task.task_type in BATCHES:
        prepare, size_setting = BATCHES[task.task_type]
        if (more := getattr(settings, size_setting) - 1) > 0:
            mates = _claim(
                worker=worker,
                lane=lane,
                narrowed_by="AND task_type = %(type)s AND priority = %(priority)s ORDER BY run_after LIMIT %(limit)s",
                type=task.task_type,
                priority=task.priority,
                limit=more,
            )
            tasks += sorted(mates, key=lambda mate: mate.run_after)  # RETURNING keeps no order
        if len(tasks) > 1:
            tasks = _prepare(prepare, tasks)
    return Counter(_run_claimed(each) for each in tasks)


def _prepare(prepare, tasks: list[MemoryTask]) -> list[MemoryTask]:
    for each in tasks:
        _heartbeats.add(each.pk)
    started, taken = time.perf_counter(), len(tasks)
    with timing.account() as spent, connection.execute_wrapper(_timed_sql):
        try:
            taken = max(1, min(prepare(tasks), len(tasks)))
        except SoftTimeLimitExceeded:  # none of them has started: back to the queue, no attempt spent
            _tasks_release(tasks)
            for each in tasks:
                _heartbeats.remove(each.pk)
            raise
        except Exception as exc:  # each handler still does its own work, with its own retries
            logger.warning(
                "batch of %s %s tasks: prepare failed: %s", len(tasks), tasks[0].task_type, type(exc).__name__
            )
    if taken < len(tasks):
        _tasks_release(tasks[taken:])
    for each in tasks[taken:]:
        _heartbeats.remove(each.pk)
    tasks = tasks[:taken]
    spent["batch_s"] = time.perf_counter() - started
    for each in tasks:
        each.timings = dict(each.timings or {})
        for key, seconds in spent.items():
            each.timings[key] = round(each.timings.get(key, 0.0) + seconds / len(tasks), 4)
    return tasks


def _run_claimed(task: MemoryTask) -> str:
    """Returns `succeeded`, `failed` (retries after a backoff), `dead` or `deferred` (NotYet: no attempt spent)."""
    _heartbeats.add(task.pk)
    try:
        with _timed_attempt(task):
            result = handler_for(task.task_type)(task)
    except NotYet as exc:
        retry_in = settings.TASK_NOT_YET_SECONDS if exc.retry_in is None else exc.retry_in
        run_after = timezone.now() + timedelta(seconds=retry_in)
        task.timings["deferred"] = task.timings.get("deferred", 0) + 1
        if _finish(task, status=MemoryTask.Status.QUEUED, attempts=task.attempts - 1, run_after=run_after):
            publish(task_id=task.id, run_after=run_after, lane=queue_of(task.task_type))
        logger.info("task %s (%s) waits %.1fs: %s", task.id, task.task_type, retry_in, type(exc).__name__)
        return "deferred"
    except Exception as exc:
        error = _error_text(exc)
        now = timezone.now()
        task.timings["failed_s"] = task.timings.get("failed_s", 0.0) + task.timings.pop("_attempt_s", 0.0)
        if task.attempts >= task.max_attempts:
            _finish(task, status=MemoryTask.Status.DEAD, error=error, finished_at=now)
            logger.error(
                "task %s (%s) is dead after %s attempts: %s", task.id, task.task_type, task.attempts, type(exc).__name__
            )
            return "dead"
        run_after = now + timedelta(seconds=retry_delay(task.attempts, task.task_type))
        if _finish(task, status=MemoryTask.Status.FAILED, error=error, run_after=run_after):
            publish(task_id=task.id, run_after=run_after, lane=queue_of(task.task_type))
        logger.warning("task %s (%s) failed attempt %s: %s", task.id, task.task_type, task.attempts, type(exc).__name__)
        return "failed"
    finally:
        _heartbeats.remove(task.pk)
    _finish(task, status=MemoryTask.Status.SUCCEEDED, result=result, error="", finished_at=timezone.now())
    return "succeeded"


# A claimed batch is given back once its first tasks have run this long: slow work is not held by
# one process while another idles.
BATCH_HOLD_SECONDS = 0.25


def tasks_drain(*, worker: str, first_task_id=None, lane: str | None = None) -> dict:
    """What one Celery message does: runs the task it names, then every due task of its lane (the queue it
    came from) in batches (growing while tasks are quick) until none is due or TASK_DRAIN_SECONDS pass.
    Returns counts per outcome."""
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + settings.TASK_DRAIN_SECONDS
    if first_task_id is not None:
        first = task_claim(task_id=first_task_id, worker=worker, lane=lane)
        outcomes.update(["not-claimed"] if first is None else _run_with_batch(first, worker=worker, lane=lane))
    size = 1
    while time.monotonic() < deadline:
        batch = tasks_claim_due(worker=worker, limit=size, lane=lane)
        if not batch:
            return dict(outcomes)
        started = time.monotonic()
        for index, task in enumerate(batch):
            if index and time.monotonic() - started > BATCH_HOLD_SECONDS:
                _tasks_release(batch[index:])
                size = 1
                break
            outcomes.update(_run_with_batch(task, worker=worker, lane=lane))
        else:
            quick = time.monotonic() - started < BATCH_HOLD_SECONDS
            size = min(size * 2, settings.TASK_CLAIM_BATCH) if quick else 1
    publish(task_id=None, lane=lane)  # due work may remain: the next message carries on
    return dict(outcomes)


def task_run_here(task_type: str, payload: dict, *, organization=None, scope: str | None = None, body) -> MemoryTask:
    """Runs `body(task)` in this process (a management command) as a claimed, one-attempt task row, so its
    result or error (re-raised) is recorded like a worker's."""
    now = timezone.now()
    task = MemoryTask.objects.create(
        task_type=task_type,
        organization=organization,
        scope=scope,
        payload=payload,
        status=MemoryTask.Status.RUNNING,
        attempts=1,
        max_attempts=1,
        claimed_by=worker_name(),
        claimed_at=now,
        heartbeat_at=now,
    )
    _heartbeats.add(task.pk)
    try:
        result = body(task)
    except BaseException as exc:
        _finish(task, status=MemoryTask.Status.DEAD, error=_error_text(exc), finished_at=timezone.now())
        raise
    finally:
        _heartbeats.remove(task.pk)
    _finish(task, status=MemoryTask.Status.SUCCEEDED, result=result, error="", finished_at=timezone.now())
    task.refresh_from_db()
    return task
