"""Beat entry point of webhooks."""

from celery import shared_task

from apps.webhooks.services import deliveries_prune


@shared_task(name="webhooks.prune_deliveries")
def prune_deliveries() -> int:
    return deliveries_prune()
