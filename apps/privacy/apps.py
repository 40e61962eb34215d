from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "apps.privacy"
    label = "privacy"
    verbose_name = "Privacy and retention"

    def ready(self):
        from apps.core.schedules import register_schedule
        from apps.privacy import handlers  # noqa: F401  (registers pipeline handlers)

        register_schedule(
            name="privacy: prune transcripts past retention", task="privacy.enqueue_retention", every_seconds=86400
        )
