"""Celery entry points of the pipeline: thin wrappers that take ids and call services."""

from celery import shared_task
from celery.signals import worker_ready
from django.db import close_old_connections

from apps.pipeline import services


@shared_task(name="pipeline.run_memory_task", bind=True)
def run_memory_task(self, task_id: str | None = None, lane: str | None = None):
    """Drains the due tasks of `lane`, the queue the message came from (None: the default queue). An eager
    run (no broker) runs the named task only, inside the caller's request."""
    if self.request.is_eager:
        worker = services.worker_name()
        return services.task_execute(task_id=task_id, worker=worker, lane=lane) if task_id else "not-claimed"
    # Workers reuse connections across tasks (CELERY_DB_REUSE_MAX); replace a broken or expired one.
    close_old_connections()
    return services.tasks_drain(worker=services.worker_name(), first_task_id=task_id, lane=lane)


@shared_task(name="pipeline.republish_due_tasks")
def republish_due_tasks() -> int:
    return services.republish_due_tasks()


@shared_task(name="pipeline.recover_stale_tasks")
def recover_stale_tasks() -> dict:
    return services.recover_stale_tasks()


@shared_task(name="pipeline.prune_finished_tasks")
def prune_finished_tasks() -> int:
    return services.prune_finished_tasks()


@worker_ready.connect
def start_worker_heartbeats(sender, **kwargs):
    services.worker_heartbeats_start(hostname=sender.hostname)
