"""Export requests made through the API: create one with its pipeline task, run it, expire it."""

import hashlib
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core import replicas
from apps.core.events import EXPORT_READY, emit_event
from apps.core.models import update_row
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue
from apps.portability.models import ExportPerson, ExportRequest
from apps.portability.services.export import SCOPE, Selection, archive_export
from apps.portability.services.people import PeopleRecorder
from apps.privacy.services.subjects import subject_resolve
from apps.tenancy.models import Client

logger = logging.getLogger(__name__)

EXPORT_ARCHIVE = "export_archive"
EXPIRE_EXPORTS = "expire_exports"


def export_request(*, client, selection: str, value: str) -> ExportRequest:
    """The caller has already found the subject or checked the scope's name. While the client's export of the
    same subject is still being written, asking again answers that one."""
    if not client.can_export:
        raise PermissionDenied("This client may not export: exports need the client's can_export permission.")
    with transaction.atomic():
        # The client's row is the lock two concurrent requests of the same client queue on.
        Client.objects.select_for_update().filter(pk=client.pk).values_list("pk", flat=True).first()
        # Queued, running, or failed with its task still to retry.
        running = (
            ExportRequest.objects.filter(
                organization_id=client.organization_id,
                requested_by=client,
                selection=selection,
                value=value,
                status__in=(ExportRequest.Status.QUEUED, ExportRequest.Status.RUNNING, ExportRequest.Status.FAILED),
                task_id__in=MemoryTask.objects.filter(status__in=MemoryTask.ACTIVE_STATUSES).values("pk"),
            )
            .order_by("-created_at")
            .first()
        )
        if running is not None:
            return running
        export = ExportRequest.objects.create(
            organization_id=client.organization_id, requested_by=client, selection=selection, value=value
        )
        update_row(export, task_id=_export_task(export, organization=client.organization, client=client).pk)
    logger.info("export %s of a %s queued (task %s)", export.pk, selection, export.task_id)
    return export


def _export_task(export: ExportRequest, *, organization, client):
    # Organisation-wide work: no scope; the requester sees the task.
    key = f"export:{export.pk}"
    return enqueue(
        EXPORT_ARCHIVE, {"export": str(export.pk)}, organization=organization, client=client, idempotency_key=key
    )


def export_path(export: ExportRequest) -> Path:
    return Path(settings.EXPORT_DIR) / export.file_name


class ExportOverrun(RuntimeError):
    """Erasures kept running while the archive was written, every time: the task retries later."""


# Writes of an export across which an erasure ran, before its task retries.
EXPORT_WRITES = 3


def export_run(*, export: ExportRequest) -> dict:
    """Records whose rows the archive holds. One across which an erasure ran (it bumped the generation) may hold
    what the erasure deleted: it is written again."""
    if export.selection == ExportRequest.Selection.SCOPE:
        selection = Selection(organization=export.organization, kind=SCOPE, scope=export.value)
    else:
        subject = subject_resolve(organization=export.organization, kind=export.selection, subject_id=export.value)
        selection = Selection(organization=export.organization, kind=export.selection, subject=subject)
    directory = Path(settings.EXPORT_DIR)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # archives hold people's data
    file_name = f"{export.pk}.zip"
    path = directory / file_name
    for _ in range(EXPORT_WRITES):
        update_row(export, status=ExportRequest.Status.RUNNING, error="")
        generation = ExportRequest.objects.values_list("generation", flat=True).get(pk=export.pk)
        ExportPerson.objects.filter(export=export).delete()
        people = PeopleRecorder(export)
        # The archive may be read from a replica, but only one that has replayed everything committed
        # before the generation was read: an erasure that committed before it is then not in it.
        replayed = replicas.read_alias(up_to_date=True, wait_seconds=settings.REPLICA_MAX_LAG_SECONDS)
        try:
            manifest = replicas.with_fallback(
                replayed,
                lambda database, see=people.see: archive_export(
                    selection=selection, path=path, on_row=see, database=database
                ),
            )
            people.flush()
        except Exception as exc:
            update_row(export, status=ExportRequest.Status.FAILED, error=type(exc).__name__)
            raise
        with path.open("rb") as archive:
            digest = hashlib.file_digest(archive, "sha256").hexdigest()
        now = timezone.now()
        fields = {
            "status": ExportRequest.Status.SUCCEEDED,
            "file_name": file_name,
            "size_bytes": path.stat().st_size,
            "sha256": digest,
            "counts": {name[: -len(".jsonl")]: entry["rows"] for name, entry in manifest["files"].items()},
            "people_recorded": True,
            "finished_at": now,
            "expires_at": now + timedelta(seconds=settings.EXPORT_TTL_SECONDS),
        }
        # One statement against the erasure's bump (purge_exports): either the bump comes first and
        # this matches nothing, or the archive is ready before the erasure looks for it.
        with transaction.atomic():
            ready = ExportRequest.objects.filter(
                pk=export.pk, status=ExportRequest.Status.RUNNING, generation=generation
            ).update(**fields, updated_at=now)
            if ready:
                emit_event(
                    EXPORT_READY,
                    organization_id=export.organization_id,
                    data={
                        "export_id": str(export.pk),
                        "selection": export.selection,
                        "value": export.value,
                        "expires_at": fields["expires_at"].isoformat(),
                    },
                )
        if ready:
            for name, value in fields.items():
                setattr(export, name, value)
            logger.info("export %s written (%s bytes)", export.pk, export.size_bytes)
            return {"export": str(export.pk), "rows": sum(export.counts.values())}
        path.unlink(missing_ok=True)
        logger.info("export %s: an erasure ran while it was written; writing it again", export.pk)
    update_row(export, status=ExportRequest.Status.FAILED, error=ExportOverrun.__name__)
    raise ExportOverrun(f"Erasures ran during each of {EXPORT_WRITES} writes of export {export.pk}.")


def export_is_downloadable(export: ExportRequest) -> bool:
    return (
        export.status == ExportRequest.Status.SUCCEEDED
        and export.expires_at is not None
        and export.expires_at > timezone.now()
        and export_path(export).is_file()
    )


def _write_again(exports) -> None:
    """Those still being written are written again (their generation is bumped)."""
    with transaction.atomic():
        exports.filter(status__in=(ExportRequest.Status.QUEUED, ExportRequest.Status.RUNNING)).update(
            generation=F("generation") + 1, updated_at=timezone.now()
        )


def exports_rewrite_holding(*, organization, user_id: str, scope: str) -> dict:
    """Rows of `user_id` in `scope` were deleted: every export that may hold them is written again."""
    exports = (
        ExportRequest.objects.filter(organization=organization)
        .exclude(Q(selection=ExportRequest.Selection.SCOPE) & ~Q(value=scope))
        .exclude(Q(selection=ExportRequest.Selection.USER) & ~Q(value=user_id))
    )
    _write_again(exports)
    ready = exports.filter(status=ExportRequest.Status.SUCCEEDED).filter(
        Q(pk__in=ExportPerson.objects.filter(kind=ExportPerson.Kind.USER, subject_id=user_id).values("export_id"))
        | Q(people_recorded=False)
    )
    rewritten = list(ready.select_related("organization", "requested_by"))
    for export in rewritten:
        _rewrite(export)
    return {"portability.ExportRequest (archive written again)": len(rewritten)} if rewritten else {}


def _rewrite(export: ExportRequest) -> None:
    with transaction.atomic():
        task = _export_task(export, organization=export.organization, client=export.requested_by)
        _discard(
            export,
            status=ExportRequest.Status.QUEUED,
            task_id=task.pk,
            size_bytes=0,
            sha256="",
            counts={},
            error="",
            finished_at=None,
            expires_at=None,
        )
    logger.info("export %s: rows it held were deleted; written again (task %s)", export.pk, export.task_id)


def purge_exports(subject, erasure_id) -> dict:
    """Archives holding the subject's rows, or written before their people were recorded; the requests stay, expired."""
    exports = ExportRequest.objects.filter(organization=subject.organization)
    _write_again(exports)
    holding = ExportPerson.objects.filter(kind=subject.kind, subject_id=subject.subject_id).values("export_id")
    deleted = list(
        exports.filter(status=ExportRequest.Status.SUCCEEDED).filter(
            Q(pk__in=holding) | Q(people_recorded=False) | Q(selection=subject.kind, value=subject.subject_id)
        )
    )
    for export in deleted:
        _discard(export)
    return {"portability.ExportRequest (archive deleted)": len(deleted)}


def _discard(export: ExportRequest, status=ExportRequest.Status.EXPIRED, **fields) -> None:
    """Its archive and the record of whom it held go; the request stays."""
    if export.file_name:
        export_path(export).unlink(missing_ok=True)
    ExportPerson.objects.filter(export=export).delete()
    update_row(export, status=status, file_name="", **fields)


def exports_expire() -> dict:
    expired = list(ExportRequest.objects.filter(status=ExportRequest.Status.SUCCEEDED, expires_at__lte=timezone.now()))
    for export in expired:
        _discard(export)
    return {"expired": len(expired)}
