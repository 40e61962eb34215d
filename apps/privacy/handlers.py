"""Pipeline handlers of privacy: thin, they load by id and call a service."""

from apps.pipeline.registry import register_handler
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import ERASE_SUBJECT, erasure_run
from apps.privacy.services.retention import PRUNE_RETENTION, retention_prune


@register_handler(ERASE_SUBJECT)
def erase_subject(task) -> dict:
    erasure = ErasureRequest.objects.select_related("organization").filter(pk=task.payload["erasure"]).first()
    if erasure is None:
        return {"skipped": "erasure request no longer exists"}
    return erasure_run(erasure=erasure)


@register_handler(PRUNE_RETENTION)
def prune_retention(task) -> dict:
    return retention_prune()
