from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "apps.privacy"
    verbose_name = "Privacy and retention"

    def ready(self):
        from apps.core.schedules import register_schedule
        from apps.memories.changes import MemoryChange, register_memory_change
        from apps.privacy import handlers  # noqa: F401  (registers pipeline handlers)
        from apps.privacy.services import cascade
        from apps.skills.changes import register_experience_change

        # The cascade behind the deletes and edits of the apps below.
        register_memory_change(
            MemoryChange(delete=cascade.memory_delete, edited=cascade.memory_edited, removed=cascade.items_removed)
        )
        register_experience_change(delete=cascade.experience_delete)

        register_schedule(
            name="privacy: prune transcripts past retention", task="privacy.enqueue_retention", every_seconds=86400
        )
