from django.apps import AppConfig


class PortabilityConfig(AppConfig):
    name = "apps.portability"
    label = "portability"
    verbose_name = "Export and import"

    def ready(self):
        from apps.core.schedules import register_schedule
        from apps.portability import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.portability.services.requests import purge_exports
        from apps.privacy.services.purge import register_purge_step

        register_purge_step(purge_exports)

        register_schedule(
            name="portability: delete expired export archives", task="portability.enqueue_expiry", every_seconds=3600
        )
