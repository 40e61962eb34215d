"""The webhook delivery task."""

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.webhooks.services import DELIVER_WEBHOOK, WEBHOOK_QUEUE, delivery_run


# On a queue of their own: a slow receiver holds webhook workers only, and each organisation at most
# WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION of them.
@register_handler(
    DELIVER_WEBHOOK,
    priority=MemoryTask.Priority.URGENT,
    backoff=("WEBHOOK_RETRY_BASE_SECONDS", "WEBHOOK_RETRY_MAX_SECONDS"),
    queue=WEBHOOK_QUEUE,
    organization_cap="WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION",
)
def deliver_webhook(task) -> dict:
    return delivery_run(delivery_id=task.payload["delivery"], final=task.attempts >= task.max_attempts)
