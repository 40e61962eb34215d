from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "apps.conversations"
    label = "conversations"
    verbose_name = "Sessions and transcripts"

    def ready(self):
        from apps.conversations import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.core.schedules import register_schedule

        register_schedule(
            name="conversations: seal idle sessions", task="conversations.seal_idle_sessions", every_seconds=60
        )
        register_schedule(
            name="conversations: prune idempotency records",
            task="conversations.prune_idempotency_records",
            every_seconds=3600,
        )
