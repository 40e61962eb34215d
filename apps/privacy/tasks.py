"""Beat entry point: the daily retention run goes through the pipeline, so it is retried, recorded and never
runs twice at once."""

from celery import shared_task

from apps.pipeline.services import enqueue
from apps.privacy.services.retention import PRUNE_RETENTION


@shared_task(name="privacy.enqueue_retention")
def enqueue_retention() -> str:
    return str(enqueue(PRUNE_RETENTION, {}, idempotency_key=PRUNE_RETENTION).pk)
