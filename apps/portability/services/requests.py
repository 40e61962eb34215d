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
    """Records the request and enqueues its task in one transaction. The caller has already found
    the subject in the client's organisation (a user, a client) or checked the scope's name.

    One export per subject per client is written at a time: while the client's export of the same
    subject is queued, running or waiting to retry, asking again answers that one."""
    if not client.can_export:
        raise PermissionDenied("This client may not export: exports need the client's can_export permission.")
    with transaction.atomic():
        # The client's row is the lock two concurrent requests of the same client queue on.
        Client.objects.select_for_update().filter(pk=client.pk).values_list("pk", flat=True).first()
        running = _running(client=client, selection=selection, value=value)
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


def _running(*, client, selection: str, value: str) -> ExportRequest | None:
    """The client's export of the subject that is still being written: queued, running, or failed
    with its task still to retry (an export whose task is over, dead or cancelled, is not)."""
    return (
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


def export_path(export: ExportRequest) -> Path:
    return Path(settings.EXPORT_DIR) / export.file_name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as archive:
        for block in iter(lambda: archive.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ExportOverrun(RuntimeError):
    """Erasures kept running while the archive was written, every time: the task retries later."""


# How many times an export is written again when an erasure ran meanwhile, before its task retries.
EXPORT_WRITES = 3


def export_run(*, export: ExportRequest) -> dict:
    """Writes the archive under EXPORT_DIR, recording whose rows it holds; running again writes it
    anew. An archive across which an erasure in the organisation ran is deleted and written again
    (the erasure bumped the export's generation): it may hold what the erasure deleted."""
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
        now = timezone.now()
        fields = {
            "status": ExportRequest.Status.SUCCEEDED,
            "file_name": file_name,
            "size_bytes": path.stat().st_size,
            "sha256": _sha256(path),
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


def exports_delete_archives(*, organization, kind: str, subject_id: str) -> int:
    """Deletes now the archives that hold rows of one end user or client (an erasure of them is
    running), and those written before their people were recorded; the requests stay, expired,
    as the record that an export was made. Exports still queued or running are written again."""
    with transaction.atomic():
        ExportRequest.objects.filter(
            organization=organization, status__in=(ExportRequest.Status.QUEUED, ExportRequest.Status.RUNNING)
        ).update(generation=F("generation") + 1, updated_at=timezone.now())
    holding = ExportPerson.objects.filter(kind=kind, subject_id=subject_id).values("export_id")
    exports = ExportRequest.objects.filter(organization=organization, status=ExportRequest.Status.SUCCEEDED).filter(
        Q(pk__in=holding) | Q(people_recorded=False) | Q(selection=kind, value=subject_id)
    )
    deleted = 0
    for export in exports:
        _discard(export)
        deleted += 1
    return deleted


def exports_rewrite_holding(*, organization, user_id: str, scope: str) -> dict:
    """Rows of `user_id` in `scope` were deleted (a session, a turn, a memory): every archive waiting
    for download that may hold them (it holds rows of that user and is not another scope's) is
    deleted and its export queued to be written again without them; exports being written are
    written again (their generation is bumped, as an erasure does)."""
    with transaction.atomic():
        pending = ExportRequest.objects.filter(
            organization=organization, status__in=(ExportRequest.Status.QUEUED, ExportRequest.Status.RUNNING)
        )
        _may_hold(pending, user_id=user_id, scope=scope).update(
            generation=F("generation") + 1, updated_at=timezone.now()
        )
    ready = ExportRequest.objects.filter(organization=organization, status=ExportRequest.Status.SUCCEEDED).filter(
        Q(pk__in=ExportPerson.objects.filter(kind=ExportPerson.Kind.USER, subject_id=user_id).values("export_id"))
        | Q(people_recorded=False)
    )
    rewritten = 0
    for export in _may_hold(ready, user_id=user_id, scope=scope).select_related("organization", "requested_by"):
        _rewrite(export)
        rewritten += 1
    return {"portability.ExportRequest (archive written again)": rewritten} if rewritten else {}


def _may_hold(exports, *, user_id: str, scope: str):
    """Leaves out the exports that cannot hold rows of `user_id` in `scope`: another scope's, another user's."""
    return exports.exclude(Q(selection=ExportRequest.Selection.SCOPE) & ~Q(value=scope)).exclude(
        Q(selection=ExportRequest.Selection.USER) & ~Q(value=user_id)
    )


def _rewrite(export: ExportRequest) -> None:
    """Deletes the archive now and queues its export to be written again, as its requester's task."""
    with transaction.atomic():
        if export.file_name:
            export_path(export).unlink(missing_ok=True)
        ExportPerson.objects.filter(export=export).delete()
        task = _export_task(export, organization=export.organization, client=export.requested_by)
        update_row(
            export,
            status=ExportRequest.Status.QUEUED,
            task_id=task.pk,
            file_name="",
            size_bytes=0,
            sha256="",
            counts={},
            error="",
            finished_at=None,
            expires_at=None,
        )
    logger.info("export %s: rows it held were deleted; written again (task %s)", export.pk, export.task_id)


def purge_exports(subject, erasure_id) -> dict:
    """The erasure step of portability: archives waiting for download that hold the subject's rows
    (theirs, or an organisation's, a scope's or another person's that include them)."""
    deleted = exports_delete_archives(
        organization=subject.organization, kind=subject.kind, subject_id=subject.subject_id
    )
    return {"portability.ExportRequest (archive deleted)": deleted}


def _discard(export: ExportRequest) -> None:
    if export.file_name:
        export_path(export).unlink(missing_ok=True)
    update_row(export, status=ExportRequest.Status.EXPIRED, file_name="")
    ExportPerson.objects.filter(export=export).delete()


def exports_expire() -> dict:
    """Deletes the archives whose time is up and marks their requests expired."""
    expired = 0
    for export in ExportRequest.objects.filter(status=ExportRequest.Status.SUCCEEDED, expires_at__lte=timezone.now()):
        _discard(export)
        expired += 1
    return {"expired": expired}
