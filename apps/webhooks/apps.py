from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "apps.webhooks"
    label = "webhooks"
    verbose_name = "Webhooks"

    def ready(self):
        from apps.core.events import register_event_listener
        from apps.webhooks import handlers  # noqa: F401  (registers the delivery handler)
        from apps.webhooks.services import event_deliveries_create

        register_event_listener(event_deliveries_create)
