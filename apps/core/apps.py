from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    verbose_name = "Platform"

    def ready(self):
        from django.db.models.signals import post_migrate

        from apps.core.schedules import schedules_after_migrate

        # Reliability must not depend on remembering a command: `migrate` alone creates the beat jobs.
        post_migrate.connect(schedules_after_migrate, sender=self, dispatch_uid="core.schedules_after_migrate")
