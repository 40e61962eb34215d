from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "apps.pipeline"
    verbose_name = "Background tasks"

    def ready(self):
        from django.conf import settings

        from apps.core.schedules import register_schedule

        register_schedule(
            name="pipeline: re-publish due tasks",
            task="pipeline.republish_due_tasks",
            every_seconds=max(5, int(settings.TASK_REPUBLISH_AFTER_SECONDS)),
        )
        register_schedule(
            name="pipeline: recover stale tasks",
            task="pipeline.recover_stale_tasks",
            every_seconds=max(5, int(settings.TASK_STALE_AFTER_SECONDS // 2)),
        )
        register_schedule(
            name="pipeline: prune finished tasks", task="pipeline.prune_finished_tasks", every_seconds=3600
        )
