"""The durable task pipeline: enqueue inside the caller's transaction, claim, run, retry, recover."""

import logging
import os
import random
import socket
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Func, Value
from django.utils import timezone
from kombu.exceptions import ChannelError

from apps.core import timing
from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.registry import NotYet, backoff_of, handler_for, priority_of

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
    priority: int | None = None,
) -> MemoryTask:
    """Inserts the task row in the current transaction; after commit its id goes to Celery.
    `priority` overrides the one its handler was registered with.

    With an idempotency key that an active task of the same type already holds, that task
    is returned and nothing new is stored (inside one transaction and across concurrent ones).
    """
    if idempotency_key:
        holder = _active_with_key(task_type, idempotency_key)
        if holder is not None:
            return _handed_to(holder, client)
    task = MemoryTask(
        task_type=task_type,
        organization=organization,
        scope=scope,
        client=client,
        payload=payload,
        idempotency_key=idempotency_key,
        run_after=run_after or timezone.now(),
        max_attempts=max_attempts or settings.TASK_MAX_ATTEMPTS,
        priority=priority_of(task_type, MemoryTask.Priority.COMPILE) if priority is None else priority,
    )
    if not idempotency_key:
        task.save(force_insert=True)
    else:
        # ON CONFLICT DO NOTHING waits for a concurrent insert of the same key to commit or roll back
        # (no savepoint needed); the key's holder is then ours or the one committed first. A holder
        # that finished in between frees the key: insert again.
        for _ in range(3):
            MemoryTask.objects.bulk_create([task], ignore_conflicts=True)
            holder = _active_with_key(task_type, idempotency_key)
            if holder is not None:
                break
        else:
            raise RuntimeError(f"no active {task_type} task held its idempotency key after three inserts")
        if holder.pk != task.pk:
            return _handed_to(holder, client)
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


def _handed_to(task: MemoryTask, client) -> MemoryTask:
    """The caller's request is answered with a task another request created: the caller may read it."""
    if client is not None and client.pk != task.client_id and client.pk not in task.handed_to:
        MemoryTask.objects.filter(pk=task.pk).exclude(handed_to__contains=[client.pk]).update(
            handed_to=Func(
                F("handed_to"),
                Value(client.pk),
                function="array_append",
                output_field=MemoryTask._meta.get_field("handed_to"),
            )
        )
        task.handed_to = [*task.handed_to, client.pk]
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
    """Sends the task id (None: a message that only drains the due queue) to Celery, waiting for the
    broker at most about two BROKER_PUBLISH_TIMEOUT_SECONDS (a connect and a reply). A failure is
    logged, not raised: the row is the outbox and waits for beat."""
    from kombu import pools

    from apps.pipeline.tasks import run_memory_task

    args = [] if task_id is None else [str(task_id)]
    countdown = None
    if run_after is not None:
        countdown = max(0.0, (run_after - timezone.now()).total_seconds()) or None
    try:
        app = run_memory_task.app
        if app.conf.task_always_eager:
            run_memory_task.apply_async(args=args, countdown=countdown)
            return True
        timeout = settings.BROKER_PUBLISH_TIMEOUT_SECONDS
        with pools.producers[_publish_connection(app)].acquire(block=True, timeout=timeout) as producer:
            run_memory_task.apply_async(args=args, countdown=countdown, producer=producer, retry=False)
        return True
    except Exception as exc:  # broker down or hung: republish_due_tasks will send it
        logger.warning("could not publish task %s (%s); it stays queued for re-publishing", task_id, type(exc).__name__)
        return False


def retry_delay(attempts: int, task_type: str | None = None) -> float:
    """Exponential backoff with full jitter in its upper half, capped; by the settings the task type
    registered (apps.pipeline.registry.backoff_of), TASK_RETRY_BASE_SECONDS and _MAX_SECONDS by default."""
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


def task_claim(*, task_id, worker: str) -> MemoryTask | None:
    """Atomically moves one due, claimable row to running; None if it is not ours to run.

    Times come from the application clock, like run_after, so a task is never "not yet
    due" because the database clock disagrees.
    """
    table = MemoryTask._meta.db_table
    claimed = list(
        MemoryTask.objects.raw(
            f"""
            UPDATE {table} SET {_CLAIM_SET}
            WHERE id = (
                SELECT id FROM {table}
                WHERE id = %(id)s AND status IN ('queued', 'failed') AND run_after <= %(now)s
                FOR UPDATE SKIP LOCKED
            )
            RETURNING *
            """,
            {"worker": worker, "now": timezone.now(), "id": str(task_id)},
        )
    )
    return claimed[0] if claimed else None


def tasks_claim_due(*, worker: str, limit: int) -> list[MemoryTask]:
    """Claims up to `limit` due tasks in one statement, the most urgent first (priority, then due
    time); rows another worker is claiming are skipped, never waited for."""
    table = MemoryTask._meta.db_table
    claimed = list(
        MemoryTask.objects.raw(
            f"""
            UPDATE {table} SET {_CLAIM_SET}
            WHERE id IN (
                SELECT id FROM {table}
                WHERE status IN ('queued', 'failed') AND run_after <= %(now)s
                ORDER BY priority, run_after
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED
            )
            RETURNING *
            """,
            {"worker": worker, "now": timezone.now(), "limit": limit},
        )
    )
    return sorted(claimed, key=lambda task: (task.priority, task.run_after))


def _tasks_release(tasks: list[MemoryTask]) -> None:
    """Gives claimed tasks that have not started back to the queue, as they were: the attempt is not
    spent, and another worker (woken by one message) may take them at once."""
    MemoryTask.objects.filter(
        pk__in=[task.pk for task in tasks], status=MemoryTask.Status.RUNNING, claimed_by=tasks[0].claimed_by
    ).update(status=MemoryTask.Status.QUEUED, attempts=F("attempts") - 1, claimed_by="", updated_at=timezone.now())
    publish(task_id=tasks[0].pk)


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
    return _run_claimed(task)


def _run_claimed(task: MemoryTask) -> str:
    """Runs a task this worker claimed: `succeeded`, `failed` (it retries after a backoff), `dead`
    (out of attempts) or `deferred` (its handler raised NotYet: back in the queue, no attempt spent)."""
    _heartbeats.add(task.pk)
    try:
        with _timed_attempt(task):
            result = handler_for(task.task_type)(task)
    except NotYet as exc:
        _heartbeats.remove(task.pk)
        retry_in = settings.TASK_NOT_YET_SECONDS if exc.retry_in is None else exc.retry_in
        run_after = timezone.now() + timedelta(seconds=retry_in)
        task.timings["deferred"] = task.timings.get("deferred", 0) + 1
        if _finish(task, status=MemoryTask.Status.QUEUED, attempts=task.attempts - 1, run_after=run_after):
            publish(task_id=task.id, run_after=run_after)
        logger.info("task %s (%s) waits %.1fs: %s", task.id, task.task_type, retry_in, type(exc).__name__)
        return "deferred"
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
        run_after = now + timedelta(seconds=retry_delay(task.attempts, task.task_type))
        if _finish(task, status=MemoryTask.Status.FAILED, error=error, run_after=run_after):
            publish(task_id=task.id, run_after=run_after)
        logger.warning("task %s (%s) failed attempt %s: %s", task.id, task.task_type, task.attempts, type(exc).__name__)
        return "failed"
    finally:
        _heartbeats.remove(task.pk)
    _finish(task, status=MemoryTask.Status.SUCCEEDED, result=result, error="", finished_at=timezone.now())
    return "succeeded"


# A claimed batch is given back once its first tasks have run this long: slow work is not held by
# one process while another idles.
BATCH_HOLD_SECONDS = 0.25


def tasks_drain(*, worker: str, first_task_id=None) -> dict:
    """What one Celery message does: runs the task it names if that is still due, then every due task,
    most urgent first, claimed in batches (growing while tasks are quick, one at a time once one is
    slow), until none is due or TASK_DRAIN_SECONDS have passed; then one message carries on. A
    message whose task another drain already ran costs one claim that finds nothing. Returns the
    number of tasks per outcome."""
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + settings.TASK_DRAIN_SECONDS
    if first_task_id is not None:
        outcomes[task_execute(task_id=first_task_id, worker=worker)] += 1
    size = 1
    while time.monotonic() < deadline:
        batch = tasks_claim_due(worker=worker, limit=size)
        if not batch:
            return dict(outcomes)
        started = time.monotonic()
        for index, task in enumerate(batch):
            if index and time.monotonic() - started > BATCH_HOLD_SECONDS:
                _tasks_release(batch[index:])
                size = 1
                break
            outcomes[_run_claimed(task)] += 1
        else:
            quick = time.monotonic() - started < BATCH_HOLD_SECONDS
            size = min(size * 2, settings.TASK_CLAIM_BATCH) if quick else 1
    publish(task_id=None)  # due work may remain: the next message carries on
    return dict(outcomes)


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
    """Wakes workers for due rows nobody picked up (a publish lost while the broker was down, or a
    backlog larger than the messages in flight): a message for each of the `limit` most urgent rows
    due for longer than TASK_REPUBLISH_AFTER_SECONDS, fewer when the broker still holds messages
    enough for them (each message drains every due task, so one waiting message is as good as many)."""
    cutoff = timezone.now() - timedelta(seconds=settings.TASK_REPUBLISH_AFTER_SECONDS)
    ids = list(
        MemoryTask.objects.filter(status__in=MemoryTask.CLAIMABLE_STATUSES, run_after__lte=cutoff)
        .order_by("priority", "run_after")
        .values_list("id", flat=True)[:limit]
    )
    if not ids:
        return 0
    waiting = _messages_waiting()
    sent = 0
    for task_id in ids[: max(0, len(ids) - waiting) if waiting is not None else len(ids)]:
        if not publish(task_id=task_id):
            break  # the broker is down or hung: the rest wait for the next round, not for the broker
        sent += 1
    logger.info("re-published %s of %s due tasks (%s messages waiting)", sent, len(ids), waiting)
    return sent


def _messages_waiting() -> int | None:
    """Messages waiting in the broker's task queue (None when the broker cannot say)."""
    from apps.pipeline.tasks import run_memory_task

    app = run_memory_task.app
    if app.conf.task_always_eager:
        return None
    try:
        with _publish_connection(app).channel() as channel:
            return channel.queue_declare(queue=app.conf.task_default_queue, passive=True).message_count
    except ChannelError:  # the queue does not exist (yet): nothing waits in it
        return 0
    except Exception as exc:
        logger.warning("could not count the broker's waiting messages (%s)", type(exc).__name__)
        return None


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
