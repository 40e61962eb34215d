from django.apps import AppConfig


class PortabilityConfig(AppConfig):
    name = "apps.portability"
    verbose_name = "Export and import"

    def ready(self):
        from apps.core.schedules import register_schedule
        from apps.portability import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.portability.services.requests import exports_rewrite_holding, purge_exports
        from apps.privacy.services.cascade import register_copies_step
        from apps.privacy.services.purge import register_purge_step

        register_purge_step(purge_exports)
        register_copies_step(exports_rewrite_holding)

        register_schedule(
            name="portability: delete expired export archives", task="portability.enqueue_expiry", every_seconds=3600
        )
