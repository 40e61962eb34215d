"""Pipeline handlers of privacy: thin, they load by id and call a service."""

from apps.conversations.routing import DELETE_SESSION
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import payload_row, register_handler
from apps.privacy.models import ErasureRequest
from apps.privacy.services.cascade import session_purge
from apps.privacy.services.erasure import ERASE_SUBJECT, erasure_run
from apps.privacy.services.retention import PRUNE_RETENTION, retention_prune


@register_handler(ERASE_SUBJECT, priority=MemoryTask.Priority.URGENT)
@payload_row("erasure", ErasureRequest.objects.select_related("organization"), gone="erasure request")
def handle_erase_subject(task, erasure) -> dict:
    return erasure_run(erasure=erasure)


@register_handler(PRUNE_RETENTION, priority=MemoryTask.Priority.MAINTENANCE)
def handle_prune_retention(task) -> dict:
    return retention_prune()


@register_handler(DELETE_SESSION, priority=MemoryTask.Priority.URGENT)
def handle_delete_session(task) -> dict:
    return session_purge(session_pk=task.payload["deleted_session"])
