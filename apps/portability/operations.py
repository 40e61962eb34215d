"""The export endpoints' operations (REST: apps.portability.views).
Exports need can_export, not a read: they reach every scope. An export is the requesting client's alone."""

from apps.core.errors import ConflictError, NotFound
from apps.core.operations import Access, check_ids, get_or_404, operation, validated
from apps.portability.models import ExportRequest
from apps.portability.selectors import export_list
from apps.portability.serializers import ExportAcceptedOutputSerializer, ExportInputSerializer, ExportOutputSerializer
from apps.portability.services.requests import export_is_downloadable, export_path, export_request
from apps.privacy.selectors import erasable_clients, erasable_users


@operation(access=Access.EXPORT)
def create_export(*, client, data) -> dict:
    """Export one end user (everything erasing them would delete), one client's writes, or one scope.

    Runs in the background (202 with the export's id); poll GET exports/<id> for its download_url.
    Needs the client's can_export permission, checked before the subject is looked up."""
    data = validated(ExportInputSerializer, data)
    if "user_id" in data:
        user = get_or_404(erasable_users(client=client), user_id=data["user_id"])
        selection, value = ExportRequest.Selection.USER, user.user_id
    elif "client_id" in data:
        target = get_or_404(erasable_clients(client=client), pk=data["client_id"])
        selection, value = ExportRequest.Selection.CLIENT, str(target.pk)
    else:
        selection, value = ExportRequest.Selection.SCOPE, data["scope"]
    return ExportAcceptedOutputSerializer(export_request(client=client, selection=selection, value=value)).data


@operation(access=Access.EXPORT)
def get_export(*, client, export_id: str, download_url=None) -> dict:
    """Read an export's status and, while its archive is ready, its download_url.

    `download_url(export)` builds the transport's address of the archive."""
    check_ids(export_id=export_id)
    export = get_or_404(export_list(client=client), pk=export_id)
    url = download_url(export) if download_url is not None and export_is_downloadable(export) else None
    fields = {name: getattr(export, name) for name in ExportOutputSerializer().fields if name != "download_url"}
    return ExportOutputSerializer({**fields, "download_url": url}).data


@operation(access=Access.EXPORT)
def open_export_archive(*, client, export_id: str):
    """The archive file of a ready export (opened for reading); 409 while it is not ready, 404 once expired."""
    check_ids(export_id=export_id)
    export = get_or_404(export_list(client=client), pk=export_id)
    if export.status in (ExportRequest.Status.QUEUED, ExportRequest.Status.RUNNING, ExportRequest.Status.FAILED):
        raise ConflictError("The archive is not ready yet: poll GET exports/<id> until its status is succeeded.")
    if not export_is_downloadable(export):
        raise NotFound()
    return export, export_path(export).open("rb")
