from django.apps import AppConfig


class PlatformConfig(AppConfig):
    """The project itself as the top layer: what needs every app (the admin dashboard, the demo
    tenant, `runplatform`) lives here, and no app imports it."""

    name = "memory_platform"
    label = "platform"
    verbose_name = "Memory platform"

    def ready(self):
        from apps.core.extensions import register_dashboard_card
        from memory_platform import checks  # noqa: F401  (registers the settings check)
        from memory_platform.dashboard import processes_card

        register_dashboard_card(processes_card, order=60)
