"""The durable task pipeline (enqueue in the caller's transaction, claim, run, retry, recover): what other
apps, commands and tests call."""

from apps.pipeline.services.broker import republish_due_tasks
from apps.pipeline.services.execution import task_execute, task_run_here, tasks_drain
from apps.pipeline.services.heartbeats import heartbeat_record, worker_heartbeats_start, worker_name
from apps.pipeline.services.queue import enqueue, enqueue_debounced, task_run_sooner
from apps.pipeline.services.upkeep import (
    prune_finished_tasks,
    recover_stale_tasks,
    task_mark_dead,
    task_retry_now,
    tasks_cancel,
)

__all__ = [
    "enqueue",
    "enqueue_debounced",
    "heartbeat_record",
    "prune_finished_tasks",
    "recover_stale_tasks",
    "republish_due_tasks",
    "task_execute",
    "task_mark_dead",
    "task_retry_now",
    "task_run_here",
    "task_run_sooner",
    "tasks_cancel",
    "tasks_drain",
    "worker_heartbeats_start",
    "worker_name",
]
