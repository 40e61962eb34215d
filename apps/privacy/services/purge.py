"""The purge of one subject, as an explicit list of steps, one per app's tables.
Each step deletes in short batches and selects what is left each time, so a step run again picks up where it stopped."""

import logging
from collections import Counter

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.conversations.models import Session
from apps.conversations.services.sessions import session_hand_over
from apps.pipeline.locks import WorkOf, advisory_locks, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import tasks_cancel
from apps.privacy.services.provenance import (
    batches,
    delete_in_batches,
    delete_turns,
    forget_compiled,
    forget_memories,
    forget_skills,
    forget_staged_embeddings,
    scrub_task_results,
)
from apps.privacy.services.subjects import Subject
from apps.providers.models import LLMUsage
from apps.skills.services.review import skills_review_reassess
from apps.tenancy.models import Client
from apps.tenancy.services import client_revoke_keys, client_set_status

logger = logging.getLogger(__name__)


def stop_tasks(subject: Subject, erasure_id) -> dict:
    """First, so no worker starts embedding, extracting or distilling what is being erased."""
    return {"pipeline.MemoryTask (cancelled)": _cancel_and_scrub(subject.tasks(), erasure_id)}


def purge_skills(subject: Subject, erasure_id) -> dict:
    """Skills before experiences: what happens to a skill depends on who its sources were."""
    counts = forget_skills(subject.derived(), actor=f"privacy:erasure:{erasure_id}", own_skills=subject.own_skills())
    counts["skills.SkillUse"] = delete_in_batches(subject.skill_uses())
    counts["skills.SkillFeedback"] = delete_in_batches(subject.skill_feedback())
    counts["skills.SkillWithheld"] = delete_in_batches(subject.skills_withheld())
    return counts


def purge_profiles(subject: Subject, erasure_id) -> dict:
    """Before the items it cites are gone."""
    return forget_compiled(
        subject.derived(),
        entities=subject.entities(),
        reason=f"Sources erased by erasure {erasure_id}; the page is being recompiled.",
    )


def purge_memories(subject: Subject, erasure_id) -> dict:
    return forget_memories(subject.derived())


def purge_derived_records(subject: Subject, erasure_id) -> dict:
    return {**scrub_task_results(subject.derived()), **forget_staged_embeddings(subject.derived())}


def purge_conversations(subject: Subject, erasure_id) -> dict:
    """A client's session that holds other clients' turns passes to one of them."""
    counts = Counter(delete_turns(subject.messages()))
    counts["conversations.IngestRequest"] = delete_in_batches(subject.ingest_requests())
    if subject.kind == "user":
        counts["conversations.Session"] = delete_in_batches(subject.sessions())
        return dict(counts)
    for session in subject.sessions():
        if session_hand_over(session=session):
            counts["conversations.Session (handed over)"] += 1
        else:
            counts["conversations.Session"] += (
                Session.objects.filter(pk=session.pk).delete()[1].get("conversations.Session", 0)
            )
    return dict(counts)


def reassess_skills(subject: Subject, erasure_id) -> dict:
    """After the uses are gone. Every skill its outcomes sent to review, not only the subject's: a run that
    stopped after the uses were deleted no longer knows which those were."""
    return {"skills.Skill (back from review)": len(skills_review_reassess(organization=subject.organization))}


def purge_tasks(subject: Subject, erasure_id) -> dict:
    """Running ones finish on their own, and the verification sends the erasure round again."""
    counts = Counter()
    for queryset in (subject.tasks(), subject.orphaned_tasks()):
        for ids in batches(queryset.exclude(status__in=MemoryTask.ACTIVE_STATUSES)):
            with transaction.atomic():
                counts["providers.LLMUsage"] += LLMUsage.objects.filter(task_id__in=ids).delete()[0]
                counts["pipeline.MemoryTask"] += MemoryTask.objects.filter(pk__in=ids).delete()[0]
        counts["pipeline.MemoryTask (cancelled)"] += _cancel_and_scrub(queryset, erasure_id)
    return dict(counts)


def purge_access(subject: Subject, erasure_id) -> dict:
    """Last. A Client row stays, disabled, as the subject of the audit trail."""
    if subject.kind == "user":
        return {"tenancy.EndUser": delete_in_batches(subject.end_users())}
    counts = {"tenancy.ClientAPIKey (revoked)": 0, "tenancy.Client (disabled)": 0}
    if subject.client is not None:
        counts["tenancy.ClientAPIKey (revoked)"] = client_revoke_keys(client=subject.client)
        if subject.client.status != Client.Status.DISABLED:
            client_set_status(client=subject.client, status=Client.Status.DISABLED)
            counts["tenancy.Client (disabled)"] = 1
    return counts


STEPS = [
    stop_tasks,
    purge_skills,
    purge_profiles,
    purge_memories,
    purge_derived_records,
    purge_conversations,
    reassess_skills,
    purge_tasks,
    purge_access,
]
# Registered by apps above privacy from their ready(); they run before purge_access.
EXTRA_STEPS: list = []


def register_purge_step(step) -> None:
    """`step(subject, erasure_id) -> {table: count}`, idempotent like every step."""
    if step not in EXTRA_STEPS:
        EXTRA_STEPS.append(step)


def _cancel_and_scrub(queryset, erasure_id) -> int:
    """The payload and idempotency key of a cancelled task embed the erased rows' ids: they are emptied."""
    ids = list(queryset.filter(status__in=MemoryTask.CLAIMABLE_STATUSES).values_list("pk", flat=True))
    cancelled = 0
    for start in range(0, len(ids), settings.ERASURE_BATCH_SIZE):
        with transaction.atomic():
            batch = MemoryTask.objects.filter(pk__in=ids[start : start + settings.ERASURE_BATCH_SIZE])
            cancelled += tasks_cancel(queryset=batch)
    with transaction.atomic():
        queryset.filter(status=MemoryTask.Status.CANCELLED).update(
            payload={},
            idempotency_key=None,
            result=None,
            error=f"Cancelled by erasure {erasure_id}.",
            updated_at=timezone.now(),
        )
    return cancelled


def subject_locks(subject: Subject) -> list[str]:
    """The subject's work locks (a client's writer lock included): no such work can start or store meanwhile,
    and the purge waits for work already running."""
    work = WorkOf(
        organization_id=subject.organization.pk,
        end_user_ids=(subject.end_user.pk,) if subject.end_user is not None else (),
        scopes=tuple(sorted(set(subject.experiences().values_list("scope", flat=True)))),
        client_ids=(subject.client.pk,) if subject.client is not None else (),
    )
    return work_lock_keys(work)


def subject_purge(*, subject: Subject, erasure_id, on_step=None) -> dict:
    """`on_step(counts)` sees the progress."""
    counts: Counter = Counter()
    with advisory_locks(subject_locks(subject)):
        for step in [*STEPS[:-1], *EXTRA_STEPS, STEPS[-1]]:
            counts.update(step(subject, erasure_id))
            logger.info("erasure %s: %s done", erasure_id, step.__name__)
            if on_step is not None:
                on_step(dict(counts))
    return dict(counts)
