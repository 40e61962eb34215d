"""The webhook delivery task."""

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.webhooks.services import DELIVER_WEBHOOK, delivery_run


@register_handler(
    DELIVER_WEBHOOK,
    priority=MemoryTask.Priority.URGENT,
    backoff=("WEBHOOK_RETRY_BASE_SECONDS", "WEBHOOK_RETRY_MAX_SECONDS"),
)
def deliver_webhook(task) -> dict:
    return delivery_run(delivery_id=task.payload["delivery"], final=task.attempts >= task.max_attempts)
