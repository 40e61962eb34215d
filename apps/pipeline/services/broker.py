"""Publishing task ids to the broker (the row is the outbox) and re-publishing what it lost."""

import logging
import os
import threading
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from kombu.exceptions import ChannelError

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import QUEUES, lanes

logger = logging.getLogger(__name__)


class _PublishBatch:
    """The publishes registered by one transaction: once one gives up, the others leave their rows to beat."""

    failed = False


class _PublishAfterCommit:
    """An on_commit callback publishing one task; the callbacks of one transaction share a batch, so a
    request waits for a hung broker at most once however many tasks it enqueued."""

    def __init__(self, task_id, run_after, lane, batch: _PublishBatch):
        self.task_id, self.run_after, self.lane, self.batch = task_id, run_after, lane, batch

    def __call__(self) -> None:
        if self.batch.failed:
            logger.info(
                "task %s not published (the broker just failed); it stays queued for re-publishing", self.task_id
            )
            return
        if not publish(task_id=self.task_id, run_after=self.run_after, lane=self.lane):
            self.batch.failed = True


def publish_on_commit(*, task_id, run_after=None, lane: str | None = None) -> None:
    """Publishes the task (to its lane's queue) once the current transaction commits (at once outside one)."""
    pending = connection.run_on_commit if connection.in_atomic_block else ()
    batch = next((callback.batch for _, callback, _ in pending if isinstance(callback, _PublishAfterCommit)), None)
    transaction.on_commit(_PublishAfterCommit(task_id, run_after, lane, batch or _PublishBatch()))


_publish_connections: dict = {}


_publish_connections_lock = threading.Lock()


def _publish_connection(app):
    """A publish-only broker connection, every connect and reply bounded by BROKER_PUBLISH_TIMEOUT_SECONDS and
    never retried: a paused or half-open broker costs a publish that bound, then the row waits for beat. One per
    broker URL and process (kombu pools its producers); workers consume on Celery's own, with longer timeouts."""
    timeout = settings.BROKER_PUBLISH_TIMEOUT_SECONDS
    key = (app.conf.broker_url, timeout, os.getpid())
    with _publish_connections_lock:
        if key not in _publish_connections:
            _publish_connections[key] = app.connection_for_write(
                connect_timeout=timeout,
                transport_options={"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0},
            )
        return _publish_connections[key]


def publish(*, task_id, run_after=None, lane: str | None = None) -> bool:
    """Sends the task id (None: a message that only drains the due queue) to Celery, on the queue of its
    lane (None: the default queue; apps.pipeline.registry.queue_of), waiting for the broker at most about
    two BROKER_PUBLISH_TIMEOUT_SECONDS (a connect and a reply). A failure is logged, not raised: the row
    is the outbox and waits for beat."""
    from kombu import pools

    from apps.pipeline.tasks import run_memory_task

    args = [] if task_id is None else [str(task_id)]
    # The default lane's messages keep their old shape; another lane's name its queue for the worker.
    routing = {} if lane is None else {"kwargs": {"lane": lane}, "queue": lane}
    countdown = None if run_after is None else max(0.0, (run_after - timezone.now()).total_seconds()) or None
    try:
        app = run_memory_task.app
        if app.conf.task_always_eager:
            run_memory_task.apply_async(args=args, countdown=countdown, **routing)
            return True
        timeout = settings.BROKER_PUBLISH_TIMEOUT_SECONDS
        with pools.producers[_publish_connection(app)].acquire(block=True, timeout=timeout) as producer:
            run_memory_task.apply_async(args=args, countdown=countdown, producer=producer, retry=False, **routing)
        return True
    except Exception as exc:  # broker down or hung: republish_due_tasks will send it
        logger.warning("could not publish task %s (%s); it stays queued for re-publishing", task_id, type(exc).__name__)
        return False


def republish_due_tasks(*, limit: int = 1000) -> int:
    """Wakes workers for due rows nobody picked up (a publish lost while the broker was down, a backlog larger
    than the messages in flight): per lane, a message for each of the `limit` most urgent rows due over
    TASK_REPUBLISH_AFTER_SECONDS, less those its queue still holds (each message drains every due task)."""
    cutoff = timezone.now() - timedelta(seconds=settings.TASK_REPUBLISH_AFTER_SECONDS)
    due = MemoryTask.objects.filter(status__in=MemoryTask.CLAIMABLE_STATUSES, run_after__lte=cutoff)
    sent = 0
    for lane in lanes():
        own_types = [task_type for task_type, queue in QUEUES.items() if queue == lane]
        in_lane = due.filter(task_type__in=own_types) if lane else due.exclude(task_type__in=list(QUEUES))
        ids = list(in_lane.order_by("priority", "run_after").values_list("id", flat=True)[:limit])
        if not ids:
            continue
        waiting = _messages_waiting(lane)
        for task_id in ids[: max(0, len(ids) - waiting) if waiting is not None else len(ids)]:
            if not publish(task_id=task_id, lane=lane):
                return sent  # the broker is down or hung: the rest wait for the next round, not for the broker
            sent += 1
        logger.info(
            "re-published due tasks of lane %s (%s due, %s messages waiting)", lane or "default", len(ids), waiting
        )
    return sent


def _messages_waiting(lane: str | None = None) -> int | None:
    """Messages waiting in a lane's broker queue (None when the broker cannot say)."""
    from apps.pipeline.tasks import run_memory_task

    app = run_memory_task.app
    if app.conf.task_always_eager:
        return None
    try:
        with _publish_connection(app).channel() as channel:
            return channel.queue_declare(queue=lane or app.conf.task_default_queue, passive=True).message_count
    except ChannelError:  # the queue does not exist (yet): nothing waits in it
        return 0
    except Exception as exc:
        logger.warning("could not count the broker's waiting messages (%s)", type(exc).__name__)
        return None
