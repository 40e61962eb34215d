"""Beat entry point: lint runs through the pipeline, so it is retried, recorded and never twice at once."""

from celery import shared_task

from apps.pipeline.services import enqueue
from apps.profiles.services.entities import LINT_PROFILES


@shared_task(name="profiles.enqueue_lint")
def enqueue_lint() -> str:
    return str(enqueue(LINT_PROFILES, {}, idempotency_key=LINT_PROFILES).pk)
