"""The Celery application, configured from Django settings (CELERY_ namespace)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, import_modules

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

app = Celery("memory_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@import_modules.connect(sender=app)
def _prepare_process(**kwargs):
    """Sent when a worker or beat loads its task modules, before the worker's pool forks and before
    beat builds its scheduler. Without DATABASE_URL both start or attach to the embedded PostgreSQL;
    then both refuse to run on a configuration error or unapplied migrations, in a few lines and no
    traceback (Celery would log and ignore an exception; SystemExit passes through)."""
    from memory_platform.embedded_db import start_embedded_database
    from memory_platform.startup import StartRefused, refuse_to_start_on_errors

    start_embedded_database()
    try:
        refuse_to_start_on_errors(database=True)
    except StartRefused as refused:
        raise SystemExit(str(refused)) from None


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):
    """Workers log through Celery's own handlers: they redact user content like the web's (apps.core.logs)."""
    from apps.core.logs import RedactUserContent

    for handler in logger.handlers:
        if not any(isinstance(existing, RedactUserContent) for existing in handler.filters):
            handler.addFilter(RedactUserContent())
