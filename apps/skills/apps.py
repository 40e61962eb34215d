from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    verbose_name = "Skills"

    def ready(self):
        from apps.conversations.services.learning import register_learned_from
        from apps.pipeline.locks import register_work_locks
        from apps.skills import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.skills.search import register_sources
        from apps.skills.selectors import session_distilled_into
        from apps.skills.services.distill import DISTILL_LOCKS
        from apps.skills.services.evolve.run import evolve_locks

        register_sources()
        register_work_locks(DISTILL_LOCKS.of_work)
        register_work_locks(evolve_locks)
        register_learned_from(session_distilled_into)
