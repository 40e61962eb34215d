"""Pipeline handlers of privacy: thin, they load by id and call a service."""

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import ERASE_SUBJECT, erasure_run
from apps.privacy.services.retention import PRUNE_RETENTION, retention_prune


@register_handler(ERASE_SUBJECT, priority=MemoryTask.Priority.URGENT)
def erase_subject(task) -> dict:
    erasure = ErasureRequest.objects.select_related("organization").filter(pk=task.payload["erasure"]).first()
    if erasure is None:
        return {"skipped": "erasure request no longer exists"}
    return erasure_run(erasure=erasure)


@register_handler(PRUNE_RETENTION, priority=MemoryTask.Priority.MAINTENANCE)
def prune_retention(task) -> dict:
    return retention_prune()
