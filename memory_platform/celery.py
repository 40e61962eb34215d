"""The Celery application, configured from Django settings (CELERY_ namespace)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

app = Celery("memory_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _start_embedded_database(**kwargs):
    """Without DATABASE_URL, the worker's main process (before its pool forks) and beat start or
    attach to the embedded PostgreSQL, as they did when importing the settings started it."""
    from memory_platform.embedded_db import start_embedded_database

    start_embedded_database()


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):
    """Workers log through Celery's own handlers: they redact user content like the web's (apps.core.logs)."""
    from apps.core.logs import RedactUserContent

    for handler in logger.handlers:
        if not any(isinstance(existing, RedactUserContent) for existing in handler.filters):
            handler.addFilter(RedactUserContent())
