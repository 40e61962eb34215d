from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "apps.pipeline"
    verbose_name = "Background tasks"

    def ready(self):
        from django.conf import settings

        from apps.core.schedules import register_schedule

        for name, task, every_seconds in (
            ("pipeline: re-publish due tasks", "pipeline.republish_due_tasks", settings.TASK_REPUBLISH_AFTER_SECONDS),
            ("pipeline: recover stale tasks", "pipeline.recover_stale_tasks", settings.TASK_STALE_AFTER_SECONDS // 2),
            ("pipeline: prune finished tasks", "pipeline.prune_finished_tasks", 3600),
        ):
            register_schedule(name=name, task=task, every_seconds=max(5, int(every_seconds)))
