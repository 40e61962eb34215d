from django.apps import AppConfig


class AgentConfig(AppConfig):
    """What an agent calls: prompt-ready context in one call, management of what the platform
    learned (memories with their history, whole sessions, experiences, profiles, entities)."""

    name = "apps.agent"
    label = "agent"
    verbose_name = "The agent's API"

    def ready(self):
        from apps.agent import checks, handlers  # noqa: F401  (registers the system checks and pipeline handlers)
