"""The durable task pipeline: enqueue inside the caller's transaction, claim, run, retry, recover."""

import logging
import os
import random
import socket
import threading
import time
import traceback
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.core import timing
from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.registry import handler_for

logger = logging.getLogger(__name__)

ERROR_MAX_CHARS = 4000


def enqueue(
    task_type: str,
    payload: dict,
    *,
    organization=None,
    scope: str | None = None,
    client=None,
    idempotency_key: str | None = None,
    run_after=None,
    max_attempts: int | None = None,
) -> MemoryTask:
    """Inserts the task row in the current transaction; after commit its id goes to Celery.

    With an idempotency key that an active task of the same type already holds, that task
    is returned and nothing new is stored (inside one transaction and across concurrent ones).
    """
    if idempotency_key:
        existing = _active_with_key(task_type, idempotency_key)
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
            task = MemoryTask.objects.create(
                task_type=task_type,
                organization=organization,
                scope=scope,
                client=client,
                payload=payload,
                idempotency_key=idempotency_key,
                run_after=run_after or timezone.now(),
                max_attempts=max_attempts or settings.TASK_MAX_ATTEMPTS,
            )
    except IntegrityError:
        if not idempotency_key:  # some other rule was broken; never hand back an unrelated task
            raise
        # A concurrent transaction committed the same key first; its task is ours.
        existing = _active_with_key(task_type, idempotency_key)
        if existing is None:
            raise
        return existing
    publish_on_commit(task_id=task.id, run_after=task.run_after)
    return task


def enqueue_debounced(task_type: str, payload: dict, *, key: str, delay: float, **options) -> MemoryTask:
    """One waiting task per `key`, `delay` seconds out: later requests join it. While it runs (it may
    have read its input already), at most one follow-up waits. `options` are enqueue's."""
    run_after = timezone.now() + timedelta(seconds=delay)
    task = enqueue(task_type, payload, idempotency_key=key, run_after=run_after, **options)
    if task.status == MemoryTask.Status.RUNNING:
        task = enqueue(task_type, payload, idempotency_key=f"{key}:after:{task.pk}", run_after=run_after, **options)
    return task


def _active_with_key(task_type: str, idempotency_key: str) -> MemoryTask | None:
    return MemoryTask.objects.filter(
        task_type=task_type, idempotency_key=idempotency_key, status__in=MemoryTask.ACTIVE_STATUSES
    ).first()


class _PublishBatch:
    """The publishes registered by one transaction: once one gives up, the others leave their rows to beat."""

    failed = False


class _PublishAfterCommit:
    """An on_commit callback publishing one task; the callbacks of one transaction share a batch, so a
    request waits for a hung broker at most once however many tasks it enqueued."""

    def __init__(self, task_id, run_after, batch: _PublishBatch):
        self.task_id, self.run_after, self.batch = task_id, run_after, batch

    def __call__(self) -> None:
        if self.batch.failed:
            logger.info(
                "task %s not published (the broker just failed); it stays queued for re-publishing", self.task_id
            )
            return
        if not publish(task_id=self.task_id, run_after=self.run_after):
            self.batch.failed = True


def publish_on_commit(*, task_id, run_after=None) -> None:
    """Publishes the task once the current transaction commits (at once outside one)."""
    batch = (
        next(
            (
                callback.batch
                for _, callback, _ in connection.run_on_commit
                if isinstance(callback, _PublishAfterCommit)
            ),
            None,
        )
        if connection.in_atomic_block
        else None
    )
    transaction.on_commit(_PublishAfterCommit(task_id, run_after, batch or _PublishBatch()))


_publish_connections: dict = {}
_publish_connections_lock = threading.Lock()


def _publish_connection(app):
    """A broker connection for publishing only, whose every connect and every reply is bounded by
    BROKER_PUBLISH_TIMEOUT_SECONDS and which never retries: a paused or half-open broker costs a
    publish that bound, then the row waits for beat. One per broker URL and process (its producers
    are pooled by kombu); workers consume on Celery's own connection with its longer timeouts."""
    timeout = settings.BROKER_PUBLISH_TIMEOUT_SECONDS
    key = (app.conf.broker_url, timeout, os.getpid())
    with _publish_connections_lock:
        if key not in _publish_connections:
            _publish_connections[key] = app.connection_for_write(
                connect_timeout=timeout,
                transport_options={"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0},
            )
        return _publish_connections[key]


def publish(*, task_id, run_after=None) -> bool:
    """Sends the task id to Celery, waiting for the broker at most about two BROKER_PUBLISH_TIMEOUT_SECONDS
    (a connect and a reply). A failure is logged, not raised: the row is the outbox and waits for beat."""
    from kombu import pools

    from apps.pipeline.tasks import run_memory_task

    countdown = None
    if run_after is not None:
        countdown = max(0.0, (run_after - timezone.now()).total_seconds()) or None
    try:
        app = run_memory_task.app
        if app.conf.task_always_eager:
            run_memory_task.apply_async(args=[str(task_id)], countdown=countdown)
            return True
        timeout = settings.BROKER_PUBLISH_TIMEOUT_SECONDS
        with pools.producers[_publish_connection(app)].acquire(block=True, timeout=timeout) as producer:
            run_memory_task.apply_async(args=[str(task_id)], countdown=countdown, producer=producer, retry=False)
        return True
    except Exception as exc:  # broker down or hung: republish_due_tasks will send it
        logger.warning("could not publish task %s (%s); it stays queued for re-publishing", task_id, type(exc).__name__)
        return False


def retry_delay(attempts: int) -> float:
    """Exponential backoff with full jitter in its upper half, capped."""
    ceiling = min(settings.TASK_RETRY_MAX_SECONDS, settings.TASK_RETRY_BASE_SECONDS * 2 ** max(0, attempts - 1))
    return random.uniform(ceiling / 2, ceiling)


def task_claim(*, task_id, worker: str) -> MemoryTask | None:
    """Atomically moves one due, claimable row to running; None if it is not ours to run.

    Times come from the application clock, like run_after, so a task is never "not yet
    due" because the database clock disagrees.
    """
    table = MemoryTask._meta.db_table
    now = timezone.now()
    claimed = list(
        MemoryTask.objects.raw(
            f"""
            UPDATE {table} SET status = 'running', attempts = attempts + 1, claimed_by = %s,
                   claimed_at = %s, heartbeat_at = %s, updated_at = %s,
                   timings = CASE WHEN timings ? 'first_claimed_at' THEN timings
                             ELSE timings || jsonb_build_object('first_claimed_at', %s::timestamptz, 'first_due_at', run_after)
                             END
            WHERE id = (
                SELECT id FROM {table}
                WHERE id = %s AND status IN ('queued', 'failed') AND run_after <= %s
                FOR UPDATE SKIP LOCKED
            )
            RETURNING *
            """,
            [worker, now, now, now, now, str(task_id), now],
        )
    )
    return claimed[0] if claimed else None


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


class _SQLTimer:
    """connection.execute_wrapper: the seconds the handler spent in the database."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - started


@contextmanager
def _timed_attempt(task: MemoryTask):
    """Adds one attempt's seconds (in the handler, and in SQL, embedding, model calls and lock waits
    within it) to task.timings, which _finish writes with the outcome."""
    sql, started = _SQLTimer(), time.perf_counter()
    with timing.account() as spent, connection.execute_wrapper(sql):
        try:
            yield
        finally:
            spent.update(handler_s=time.perf_counter() - started, sql_s=sql.seconds)
            timings = task.timings = dict(task.timings or {})
            for key, seconds in spent.items():
                timings[key] = round(timings.get(key, 0.0) + seconds, 4)
            timings["_attempt_s"] = spent["handler_s"]


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


def task_execute(*, task_id, worker: str) -> str:
    """Claims and runs one task. Returns what happened, for logs and tests."""
    task = task_claim(task_id=task_id, worker=worker)
    if task is None:
        return "not-claimed"
    _heartbeats.add(task.pk)
    try:
        with _timed_attempt(task):
            result = handler_for(task.task_type)(task)
    except Exception as exc:
        _heartbeats.remove(task.pk)
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"[:ERROR_MAX_CHARS]
        now = timezone.now()
        task.timings["failed_s"] = task.timings.get("failed_s", 0.0) + task.timings.pop("_attempt_s", 0.0)
        if task.attempts >= task.max_attempts:
            _finish(task, status=MemoryTask.Status.DEAD, error=error, finished_at=now)
            logger.error(
                "task %s (%s) is dead after %s attempts: %s", task.id, task.task_type, task.attempts, type(exc).__name__
            )
            return "dead"
        run_after = now + timedelta(seconds=retry_delay(task.attempts))
        if _finish(task, status=MemoryTask.Status.FAILED, error=error, run_after=run_after):
            publish(task_id=task.id, run_after=run_after)
        logger.warning("task %s (%s) failed attempt %s: %s", task.id, task.task_type, task.attempts, type(exc).__name__)
        return "failed"
    finally:
        _heartbeats.remove(task.pk)
    _finish(task, status=MemoryTask.Status.SUCCEEDED, result=result, error="", finished_at=timezone.now())
    return "succeeded"


def task_run_here(task_type: str, payload: dict, *, organization=None, scope: str | None = None, body) -> MemoryTask:
    """Runs work in this process (a management command) as a task row, so its result is recorded like a
    worker's: the row is created running and claimed here, heart-beats while `body(task)` runs and ends
    succeeded with its result, or dead with the error (re-raised; one attempt, recovery never requeues it)."""
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
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"[:ERROR_MAX_CHARS]
        _finish(task, status=MemoryTask.Status.DEAD, error=error, finished_at=timezone.now())
        raise
    finally:
        _heartbeats.remove(task.pk)
    _finish(task, status=MemoryTask.Status.SUCCEEDED, result=result, error="", finished_at=timezone.now())
    task.refresh_from_db()
    return task


def republish_due_tasks(*, limit: int = 1000) -> int:
    """Sends again the due rows nobody picked up (a publish lost while the broker was down)."""
    cutoff = timezone.now() - timedelta(seconds=settings.TASK_REPUBLISH_AFTER_SECONDS)
    with transaction.atomic():
        ids = list(
            MemoryTask.objects.select_for_update(skip_locked=True)
            .filter(status__in=MemoryTask.CLAIMABLE_STATUSES, run_after__lte=cutoff)
            .order_by("run_after")
            .values_list("id", flat=True)[:limit]
        )
        # Pushing run_after to now means a row is re-sent at most once per grace period.
        MemoryTask.objects.filter(id__in=ids).update(run_after=timezone.now(), updated_at=timezone.now())
    sent = 0
    for task_id in ids:
        if not publish(task_id=task_id):
            break  # the broker is down or hung: the rest wait for the next round, not for the broker
        sent += 1
    if ids:
        logger.info("re-published %s of %s due tasks", sent, len(ids))
    return sent


def recover_stale_tasks() -> dict:
    """Running rows whose worker stopped heart-beating: requeue them, or bury them when out of attempts."""
    cutoff = timezone.now() - timedelta(seconds=settings.TASK_STALE_AFTER_SECONDS)
    requeued, dead = [], 0
    with transaction.atomic():
        stale = list(
            MemoryTask.objects.select_for_update(skip_locked=True).filter(
                status=MemoryTask.Status.RUNNING, heartbeat_at__lt=cutoff
            )
        )
        now = timezone.now()
        for task in stale:
            note = f"Worker {task.claimed_by or '?'} stopped heart-beating during attempt {task.attempts}."
            if task.attempts >= task.max_attempts:
                task.status, task.finished_at, dead = MemoryTask.Status.DEAD, now, dead + 1
            else:
                task.status, task.run_after = MemoryTask.Status.QUEUED, now
                requeued.append(task.id)
            task.error = note
            task.save(update_fields=["status", "finished_at", "run_after", "error", "updated_at"])
    for task_id in requeued:
        publish_on_commit(task_id=task_id)
    if stale:
        logger.warning("recovered %s stale tasks (%s requeued, %s dead)", len(stale), len(requeued), dead)
    return {"requeued": len(requeued), "dead": dead}


def prune_finished_tasks() -> int:
    """Deletes succeeded and cancelled rows after TASK_RETENTION_DAYS; dead rows stay for operators.
    Heartbeats of processes silent that long (retired workers) go with them."""
    cutoff = timezone.now() - timedelta(days=settings.TASK_RETENTION_DAYS)
    deleted, _ = MemoryTask.objects.filter(
        status__in=[MemoryTask.Status.SUCCEEDED, MemoryTask.Status.CANCELLED], finished_at__lt=cutoff
    ).delete()
    ProcessHeartbeat.objects.filter(seen_at__lt=cutoff).delete()
    return deleted


def task_run_sooner(*, task: MemoryTask, run_after) -> bool:
    """Brings a queued task that waits (a debounce) forward to `run_after`; never delays one."""
    moved = MemoryTask.objects.filter(pk=task.pk, status=MemoryTask.Status.QUEUED, run_after__gt=run_after).update(
        run_after=run_after, updated_at=timezone.now()
    )
    if moved:
        task.run_after = run_after
        publish_on_commit(task_id=task.id, run_after=run_after)
    return bool(moved)


def task_retry_now(*, task: MemoryTask) -> MemoryTask:
    """An operator's retry: a failed or dead task runs again at once, with one more attempt allowed."""
    if task.status not in (MemoryTask.Status.FAILED, MemoryTask.Status.DEAD, MemoryTask.Status.QUEUED):
        raise ValueError(f"Only queued, failed or dead tasks can be retried, not {task.status}.")
    task.status = MemoryTask.Status.QUEUED
    task.run_after = timezone.now()
    task.max_attempts = max(task.max_attempts, task.attempts + 1)
    task.finished_at = None
    try:
        with transaction.atomic():
            task.save(update_fields=["status", "run_after", "max_attempts", "finished_at", "updated_at"])
    except IntegrityError:
        task.refresh_from_db()
        raise ValueError(
            f"An active {task.task_type} task already holds its idempotency key {task.idempotency_key!r}."
        ) from None
    publish_on_commit(task_id=task.id)
    return task


def task_mark_dead(*, task: MemoryTask, reason: str) -> MemoryTask:
    if task.status in (MemoryTask.Status.SUCCEEDED, MemoryTask.Status.DEAD):
        return task
    task.status = MemoryTask.Status.DEAD
    task.error = reason
    task.finished_at = timezone.now()
    task.save(update_fields=["status", "error", "finished_at", "updated_at"])
    return task


def tasks_cancel(*, queryset) -> int:
    """Cancels tasks that have not started (used by erasure); running ones finish on their own."""
    return queryset.filter(status__in=MemoryTask.CLAIMABLE_STATUSES).update(
        status=MemoryTask.Status.CANCELLED, finished_at=timezone.now(), updated_at=timezone.now()
    )


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat_record(*, kind: str, hostname: str, started_at) -> None:
    """Upserts the heartbeat of this process (one row per kind and host name) in one statement."""
    now = timezone.now()
    ProcessHeartbeat.objects.bulk_create(
        [ProcessHeartbeat(kind=kind, hostname=hostname, pid=os.getpid(), started_at=started_at, seen_at=now)],
        update_conflicts=True,
        unique_fields=["kind", "hostname"],
        update_fields=["pid", "started_at", "seen_at"],
    )


def worker_heartbeats_start(*, hostname: str) -> threading.Thread:
    """Records a worker's heartbeat every TASK_HEARTBEAT_SECONDS from a daemon thread of its main
    process, whatever its pool is doing; a database outage is logged and retried, never fatal."""
    started_at = timezone.now()

    def beat():
        while True:
            try:
                heartbeat_record(kind=ProcessHeartbeat.Kind.WORKER, hostname=hostname, started_at=started_at)
            except Exception as exc:
                logger.warning("could not record the worker heartbeat: %s", type(exc).__name__)
                connection.close()
            time.sleep(settings.TASK_HEARTBEAT_SECONDS)

    thread = threading.Thread(target=beat, daemon=True, name="worker-heartbeat")
    thread.start()
    return thread
