from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    label = "skills"
    verbose_name = "Skills"

    def ready(self):
        from apps.skills import checks, handlers  # noqa: F401  (registers the settings check and pipeline handlers)
        from apps.skills.search import register_sources

        register_sources()
