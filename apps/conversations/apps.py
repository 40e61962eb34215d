from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "apps.conversations"
    verbose_name = "Sessions and transcripts"

    def ready(self):
        from apps.conversations import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.conversations.search_sources import MESSAGE_SOURCE
        from apps.conversations.writers import writer_locks
        from apps.core.schedules import register_schedule
        from apps.pipeline.locks import register_work_locks
        from apps.search.registry import register_source

        register_source(MESSAGE_SOURCE)
        register_work_locks(writer_locks)

        register_schedule(
            name="conversations: seal idle sessions", task="conversations.seal_idle_sessions", every_seconds=60
        )
        register_schedule(
            name="conversations: prune idempotency records",
            task="conversations.prune_idempotency_records",
            every_seconds=3600,
        )
