"""Beat entry point: expiry goes through the pipeline, so it is retried, recorded and never runs twice at once."""

from celery import shared_task

from apps.pipeline.services import enqueue
from apps.portability.services.requests import EXPIRE_EXPORTS


@shared_task(name="portability.enqueue_expiry")
def enqueue_expiry() -> str:
    return str(enqueue(EXPIRE_EXPORTS, {}, idempotency_key=EXPIRE_EXPORTS).pk)
