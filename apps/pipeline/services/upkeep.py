"""Keeping the queue healthy: stale-claim recovery, pruning, and operators' retry, kill and cancel."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.models import update_row
from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.registry import queue_of
from apps.pipeline.services.broker import publish_on_commit

logger = logging.getLogger(__name__)


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
            task.error = f"Worker {task.claimed_by or '?'} stopped heart-beating during attempt {task.attempts}."
            if task.attempts >= task.max_attempts:
                task.status, task.finished_at, dead = MemoryTask.Status.DEAD, now, dead + 1
            else:
                task.status, task.run_after = MemoryTask.Status.QUEUED, now
                requeued.append(task)
            task.save(update_fields=["status", "finished_at", "run_after", "error", "updated_at"])
    for task in requeued:
        publish_on_commit(task_id=task.id, lane=queue_of(task.task_type))
    if stale:
        logger.warning("recovered %s stale tasks (%s requeued, %s dead)", len(stale), len(requeued), dead)
    return {"requeued": len(requeued), "dead": dead}


def prune_finished_tasks() -> int:
    """Deletes succeeded and cancelled rows, and heartbeats, after TASK_RETENTION_DAYS; dead rows stay."""
    cutoff = timezone.now() - timedelta(days=settings.TASK_RETENTION_DAYS)
    deleted, _ = MemoryTask.objects.filter(
        status__in=[MemoryTask.Status.SUCCEEDED, MemoryTask.Status.CANCELLED], finished_at__lt=cutoff
    ).delete()
    ProcessHeartbeat.objects.filter(seen_at__lt=cutoff).delete()
    return deleted


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
    publish_on_commit(task_id=task.id, lane=queue_of(task.task_type))
    return task


def task_mark_dead(*, task: MemoryTask, reason: str) -> MemoryTask:
    if task.status in (MemoryTask.Status.SUCCEEDED, MemoryTask.Status.DEAD):
        return task
    update_row(task, status=MemoryTask.Status.DEAD, error=reason, finished_at=timezone.now())
    return task


def tasks_cancel(*, queryset) -> int:
    """Cancels tasks that have not started (used by erasure); running ones finish on their own."""
    return queryset.filter(status__in=MemoryTask.CLAIMABLE_STATUSES).update(
        status=MemoryTask.Status.CANCELLED, finished_at=timezone.now(), updated_at=timezone.now()
    )
