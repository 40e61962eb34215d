from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    name = "apps.profiles"
    verbose_name = "Compiled memory: entities and profiles"

    def ready(self):
        from apps.conversations.services.learning import register_learned_from
        from apps.core.schedules import register_schedule
        from apps.pipeline.locks import register_work_locks
        from apps.profiles import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.profiles.handlers import OWNER_LOCKS
        from apps.profiles.search import register_sources
        from apps.profiles.selectors import session_projected_into

        register_sources()
        register_schedule(name="profiles: lint compiled pages", task="profiles.enqueue_lint", every_seconds=3600)
        register_work_locks(OWNER_LOCKS.of_work)
        register_learned_from(session_projected_into)
