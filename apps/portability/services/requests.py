"""Export requests made through the API: create one with its pipeline task, run it, expire it."""

import hashlib
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from apps.pipeline.services import enqueue
from apps.portability.models import ExportRequest
from apps.portability.services.export import SCOPE, Selection, archive_export
from apps.privacy.services.subjects import subject_resolve

logger = logging.getLogger(__name__)

EXPORT_ARCHIVE = "export_archive"
EXPIRE_EXPORTS = "expire_exports"


def export_request(*, client, selection: str, value: str) -> ExportRequest:
    """Records the request and enqueues its task in one transaction. The caller has already found
    the subject in the client's organisation (a user, a client) or checked the scope's name."""
    if not client.can_export:
        raise PermissionDenied("This client may not export: exports need the client's can_export permission.")
    with transaction.atomic():
        export = ExportRequest.objects.create(
            organization_id=client.organization_id, requested_by=client, selection=selection, value=value
        )
        # Organisation-wide work: no scope; the requester sees the task.
        task = enqueue(
            EXPORT_ARCHIVE,
            {"export": str(export.pk)},
            organization=client.organization,
            client=client,
            idempotency_key=f"export:{export.pk}",
        )
        export.task_id = task.pk
        export.save(update_fields=["task_id", "updated_at"])
    logger.info("export %s of a %s queued (task %s)", export.pk, selection, export.task_id)
    return export


def export_path(export: ExportRequest) -> Path:
    return Path(settings.EXPORT_DIR) / export.file_name


def _save(export: ExportRequest, **fields) -> None:
    for name, value in fields.items():
        setattr(export, name, value)
    ExportRequest.objects.filter(pk=export.pk).update(**fields, updated_at=timezone.now())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as archive:
        for block in iter(lambda: archive.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_run(*, export: ExportRequest) -> dict:
    """Writes the archive under EXPORT_DIR; running again writes it anew."""
    _save(export, status=ExportRequest.Status.RUNNING, error="")
    if export.selection == ExportRequest.Selection.SCOPE:
        selection = Selection(organization=export.organization, kind=SCOPE, scope=export.value)
    else:
        subject = subject_resolve(organization=export.organization, kind=export.selection, subject_id=export.value)
        selection = Selection(organization=export.organization, kind=export.selection, subject=subject)
    directory = Path(settings.EXPORT_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    file_name = f"{export.pk}.zip"
    path = directory / file_name
    try:
        manifest = archive_export(selection=selection, path=path)
    except Exception as exc:
        _save(export, status=ExportRequest.Status.FAILED, error=type(exc).__name__)
        raise
    now = timezone.now()
    _save(
        export,
        status=ExportRequest.Status.SUCCEEDED,
        file_name=file_name,
        size_bytes=path.stat().st_size,
        sha256=_sha256(path),
        counts={name[: -len(".jsonl")]: entry["rows"] for name, entry in manifest["files"].items()},
        finished_at=now,
        expires_at=now + timedelta(seconds=settings.EXPORT_TTL_SECONDS),
    )
    logger.info("export %s written (%s bytes)", export.pk, export.size_bytes)
    return {"export": str(export.pk), "rows": sum(export.counts.values())}


def export_is_downloadable(export: ExportRequest) -> bool:
    return (
        export.status == ExportRequest.Status.SUCCEEDED
        and export.expires_at is not None
        and export.expires_at > timezone.now()
        and export_path(export).is_file()
    )


def exports_delete_archives(*, organization, selection: str, value: str) -> int:
    """Deletes the archives of exports of one subject now (an erasure of them is running); the
    requests stay, expired, as the record that an export was made."""
    deleted = 0
    exports = ExportRequest.objects.filter(organization=organization, selection=selection, value=value).exclude(
        file_name=""
    )
    for export in exports:
        export_path(export).unlink(missing_ok=True)
        _save(export, status=ExportRequest.Status.EXPIRED, file_name="")
        deleted += 1
    return deleted


def purge_exports(subject, erasure_id) -> dict:
    """The erasure step of portability: archives of the subject waiting for download hold what is being erased."""
    deleted = exports_delete_archives(
        organization=subject.organization, selection=subject.kind, value=subject.subject_id
    )
    return {"portability.ExportRequest (archive deleted)": deleted}


def exports_expire() -> dict:
    """Deletes the archives whose time is up and marks their requests expired."""
    expired = 0
    for export in ExportRequest.objects.filter(status=ExportRequest.Status.SUCCEEDED, expires_at__lte=timezone.now()):
        if export.file_name:
            export_path(export).unlink(missing_ok=True)
        _save(export, status=ExportRequest.Status.EXPIRED, file_name="")
        expired += 1
    return {"expired": expired}
