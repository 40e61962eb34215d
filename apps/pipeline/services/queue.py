"""Enqueueing: a task row inside the caller's transaction, published to Celery after commit."""

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Func, Value
from django.utils import timezone

from apps.core.bulk import insert_unless_conflict
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import PRIORITIES, queue_of
from apps.pipeline.services.broker import publish_on_commit


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
    """Inserts the task row in the current transaction; after commit its id goes to Celery. An active
    task of the type already holding `idempotency_key` is returned instead, also across transactions."""
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
        priority=PRIORITIES.get(task_type, MemoryTask.Priority.COMPILE) if priority is None else priority,
    )
    if not idempotency_key:
        task.save(force_insert=True)
    else:
        # ON CONFLICT DO NOTHING waits for a concurrent insert of the same key to commit or roll back
        # (no savepoint needed); the key's holder is then ours (stored: nothing to read back) or the
        # one committed first. A holder that finished in between frees the key: insert again.
        for _ in range(3):
            if insert_unless_conflict(task):
                break
            holder = _active_with_key(task_type, idempotency_key)
            if holder is not None:
                return _handed_to(holder, client)
        else:
            raise RuntimeError(f"no active {task_type} task held its idempotency key after three inserts")
    publish_on_commit(task_id=task.id, run_after=task.run_after, lane=queue_of(task_type))
    return task


def enqueue_debounced(task_type: str, payload: dict, *, key: str, delay: float, **options) -> MemoryTask:
    """One waiting task per `key`, `delay` seconds out, that later requests join; while it runs (it may
    have read its input already), at most one follow-up waits."""
    run_after = timezone.now() + timedelta(seconds=delay)
    task = enqueue(task_type, payload, idempotency_key=key, run_after=run_after, **options)
    if task.status == MemoryTask.Status.RUNNING:
        task = enqueue(task_type, payload, idempotency_key=f"{key}:after:{task.pk}", run_after=run_after, **options)
    return task


def _handed_to(task: MemoryTask, client) -> MemoryTask:
    """The caller is answered with a task another request created: it may read it."""
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


def task_run_sooner(*, task: MemoryTask, run_after) -> bool:
    """Brings a queued task that waits (a debounce) forward to `run_after`; never delays one."""
    moved = MemoryTask.objects.filter(pk=task.pk, status=MemoryTask.Status.QUEUED, run_after__gt=run_after).update(
        run_after=run_after, updated_at=timezone.now()
    )
    if moved:
        task.run_after = run_after
        publish_on_commit(task_id=task.id, run_after=run_after, lane=queue_of(task.task_type))
    return bool(moved)
