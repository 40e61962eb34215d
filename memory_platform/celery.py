"""The Celery application, configured from Django settings (CELERY_ namespace)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

app = Celery("memory_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):
    """Workers log through Celery's own handlers: they redact user content like the web's (apps.core.logs)."""
    from apps.core.logs import RedactUserContent

    for handler in logger.handlers:
        if not any(isinstance(existing, RedactUserContent) for existing in handler.filters):
            handler.addFilter(RedactUserContent())
