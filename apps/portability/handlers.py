"""Pipeline handlers of portability: thin, they load by id and call a service."""

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import payload_row, register_handler
from apps.portability.models import ExportRequest
from apps.portability.services.requests import EXPIRE_EXPORTS, EXPORT_ARCHIVE, export_run, exports_expire


@register_handler(EXPORT_ARCHIVE, requester_only=True)
@payload_row("export", ExportRequest.objects.select_related("organization"), gone="export request")
def handle_export_archive(task, export) -> dict:
    return export_run(export=export)


@register_handler(EXPIRE_EXPORTS, priority=MemoryTask.Priority.MAINTENANCE)
def handle_expire_exports(task) -> dict:
    return exports_expire()
