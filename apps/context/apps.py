from django.apps import AppConfig


class ContextConfig(AppConfig):
    """Prompt-ready context in one call (POST memory/context), ranked by one search and fitted to a budget."""

    name = "apps.context"
    verbose_name = "Prompt-ready context"

    def ready(self):
        from apps.context import checks  # noqa: F401  (registers the system checks)
