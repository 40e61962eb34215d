from celery import shared_task

from apps.conversations.services.ingest import idempotency_records_prune
from apps.conversations.services.sessions import seal_idle_sessions as seal_idle


@shared_task(name="conversations.seal_idle_sessions")
def seal_idle_sessions() -> int:
    return seal_idle()


@shared_task(name="conversations.prune_idempotency_records")
def prune_idempotency_records() -> int:
    return idempotency_records_prune()
