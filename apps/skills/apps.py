from django.apps import AppConfig


class SkillsConfig(AppConfig):
    name = "apps.skills"
    verbose_name = "Skills"

    def ready(self):
        from apps.conversations.services.learning import register_learned_from
        from apps.core.events import SKILL_EVOLVED, SKILL_REVIEW_NEEDED, register_event_content
        from apps.pipeline.locks import register_work_locks
        from apps.skills import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.skills.search import register_sources
        from apps.skills.selectors import session_distilled_into
        from apps.skills.services.distill import DISTILL_LOCKS
        from apps.skills.services.evolve.run import evolve_locks
        from apps.skills.services.skills import skill_event_content

        register_sources()
        register_work_locks(DISTILL_LOCKS.of_work)
        register_work_locks(evolve_locks)
        register_learned_from(session_distilled_into)
        register_event_content(SKILL_EVOLVED, skill_event_content)
        register_event_content(SKILL_REVIEW_NEEDED, skill_event_content)
