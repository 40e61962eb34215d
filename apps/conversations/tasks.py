from celery import shared_task

from apps.conversations import services


@shared_task(name="conversations.seal_idle_sessions")
def seal_idle_sessions() -> int:
    return services.seal_idle_sessions()


@shared_task(name="conversations.prune_idempotency_records")
def prune_idempotency_records() -> int:
    return services.idempotency_records_prune()
