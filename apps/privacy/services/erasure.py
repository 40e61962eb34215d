"""Erasure requests: create one (and its pipeline task, in one transaction), and run it."""

import logging
from collections import Counter
from functools import partial

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.events import ERASURE_FINISHED, emit_event
from apps.core.models import update_row
from apps.core.replicas import replicas_behind
from apps.pipeline.services import enqueue
from apps.privacy.models import ErasureRequest
from apps.privacy.services.purge import subject_purge
from apps.privacy.services.subjects import Subject, subject_resolve
from apps.privacy.services.verify import subject_fingerprint, subject_verify
from apps.profiles.services.entities import profiles_lint_enqueue

logger = logging.getLogger(__name__)

ERASE_SUBJECT = "erase_subject"


class ErasureIncomplete(Exception):
    """Verification found something left (e.g. a task that was running); the pipeline retries."""


def erasure_request(*, subject: Subject, requested_by=None, requested_by_staff: str = "") -> ErasureRequest:
    """While an erasure of the same subject is in progress, that one is returned. An API client needs
    `can_erase`; a staff member's permission is checked by the admin."""
    if requested_by is not None and not requested_by.can_erase:
        logger.warning("erasure refused: client %s lacks can_erase", requested_by.pk)
        raise PermissionDenied("This client may not erase: erasure needs the client's can_erase permission.")
    authorized_by = (
        ErasureRequest.Authorization.STAFF if requested_by is None else ErasureRequest.Authorization.CLIENT_CAN_ERASE
    )
    lookup = {"organization": subject.organization, "subject_kind": subject.kind, "subject_id": subject.subject_id}
    try:
        with transaction.atomic():
            erasure = ErasureRequest.objects.create(
                **lookup, requested_by=requested_by, requested_by_staff=requested_by_staff, authorized_by=authorized_by
            )
            # Organisation-wide work: no scope; the requester and clients with can_erase see the task.
            task = enqueue(
                ERASE_SUBJECT,
                {"erasure": str(erasure.pk)},
                organization=subject.organization,
                client=requested_by,
                idempotency_key=f"erase:{erasure.pk}",
            )
            update_row(erasure, task_id=task.pk)
    except IntegrityError:
        existing = ErasureRequest.objects.filter(**lookup, status__in=ErasureRequest.ACTIVE_STATUSES).first()
        if existing is None:
            raise
        return existing
    logger.info("erasure %s of a %s queued (task %s)", erasure.pk, subject.kind, erasure.task_id)
    return erasure


def erasure_run(*, erasure: ErasureRequest) -> dict:
    """Running it again only adds what is new."""
    update_row(erasure, status=ErasureRequest.Status.RUNNING, started_at=erasure.started_at or timezone.now(), error="")
    resolve = partial(
        subject_resolve, organization=erasure.organization, kind=erasure.subject_kind, subject_id=erasure.subject_id
    )
    subject = resolve()
    previous = dict(erasure.counts or {})

    def progress(counts):
        merged = Counter(previous)
        merged.update(counts)
        update_row(erasure, counts=dict(merged))

    try:
        # Taken before the purge (and never stored): the subject's words, to look for afterwards.
        fingerprint = subject_fingerprint(subject)
        run_counts = subject_purge(subject=subject, erasure_id=erasure.pk, on_step=progress)
        residual = subject_verify(subject=resolve(), fingerprint=fingerprint)
    except Exception as exc:
        update_row(erasure, status=ErasureRequest.Status.FAILED, error=type(exc).__name__)
        raise
    if residual["total"]:
        update_row(erasure, status=ErasureRequest.Status.FAILED, residual=residual, error=ErasureIncomplete.__name__)
        raise ErasureIncomplete(f"erasure {erasure.pk}: {residual['total']} residual item(s) after the purge")
    # Not done while a read replica still serves what went (DATABASE_REPLICA_URLS).
    behind = replicas_behind(timeout=settings.ERASURE_REPLICA_WAIT_SECONDS)
    if behind:
        residual = {**residual, "replicas_behind": behind}
        update_row(erasure, status=ErasureRequest.Status.FAILED, residual=residual, error=ErasureIncomplete.__name__)
        raise ErasureIncomplete(f"erasure {erasure.pk}: read replica(s) {', '.join(behind)} have not replayed it")
    with transaction.atomic():
        update_row(erasure, status=ErasureRequest.Status.SUCCEEDED, residual=residual, finished_at=timezone.now())
        emit_event(
            ERASURE_FINISHED,
            organization_id=erasure.organization_id,
            # Identified by the erasure's id (the requester has it from the 202), never by the erased user_id:
            # the event leaves the platform and its delivery log keeps it.
            data={"erasure_id": str(erasure.pk), "subject_kind": erasure.subject_kind, "status": erasure.status},
        )
    # Compiled pages of other people may have cited what is gone: lint them now, not at the next beat.
    profiles_lint_enqueue(organization=erasure.organization)
    logger.info("erasure %s succeeded: %s", erasure.pk, {table: n for table, n in erasure.counts.items() if n})
    return {"erasure": str(erasure.pk), "removed": sum(run_counts.values())}
