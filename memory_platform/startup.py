"""Every long-running process checks its configuration before it serves: web (wsgi, asgi), the MCP
endpoint, and Celery's worker and beat (memory_platform.celery). Management commands get the same
checks from Django itself."""

import logging

from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger(__name__)


class StartRefused(ImproperlyConfigured):
    """A configuration error, or a database behind the code: the process must not start.

    An Exception, not SystemExit: gunicorn treats an exception while a worker boots as a boot error
    and stops, where an exit would be retried for ever.
    """


def refuse_to_start_on_errors(*, database: bool = False) -> None:
    """Raises StartRefused naming every serious check message; logs the warnings.

    With `database`, the database checks run too (stored vectors of another embedding model), and
    unapplied migrations refuse the start in one line naming `migrate`.
    """
    messages = run_checks(include_deployment_checks=False, databases=["default"] if database else None)
    for message in messages:
        if not message.is_serious():
            logger.warning("%s: %s", message.id, message.msg)
    errors = [f"{message.id}: {message.msg}" for message in messages if message.is_serious()]
    if errors:
        raise StartRefused("The configuration has errors, so this process does not start:\n  " + "\n  ".join(errors))
    if database:
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if unapplied:
            raise StartRefused(
                f"The database is behind the code ({len(unapplied)} unapplied migrations): "
                "run `python manage.py migrate` first."
            )
