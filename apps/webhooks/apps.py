from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "apps.webhooks"
    verbose_name = "Webhooks"

    def ready(self):
        from apps.core.events import register_event_listener
        from apps.core.schedules import register_schedule
        from apps.privacy.services.purge import register_purge_step
        from apps.webhooks import checks, handlers  # noqa: F401  (register the network check and the delivery handler)
        from apps.webhooks.services import event_deliveries_create, purge_deliveries

        register_event_listener(event_deliveries_create)
        register_purge_step(purge_deliveries)
        register_schedule(
            name="webhooks: prune finished deliveries", task="webhooks.prune_deliveries", every_seconds=3600
        )
