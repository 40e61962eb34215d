from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "apps.memories"
    verbose_name = "Episodic and semantic memories"

    def ready(self):
        from apps.conversations.services.learning import register_learned_from
        from apps.core.schedules import register_schedule
        from apps.memories import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.memories.search import register_sources
        from apps.memories.selectors import session_extracted_into
        from apps.memories.services.extract import EXTRACT_LOCKS
        from apps.pipeline.locks import register_work_locks

        register_sources()
        register_schedule(
            name="memories: purge deleted memories", task="memories.purge_deleted_memories", every_seconds=3600
        )
        register_work_locks(EXTRACT_LOCKS.of_work)
        register_learned_from(session_extracted_into)
