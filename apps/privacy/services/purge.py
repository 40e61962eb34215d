"""The purge of one subject, as an explicit list of steps, one per app's tables.

Every step deletes in batches of ERASURE_BATCH_SIZE rows, each batch its own short
transaction (no table locks, nothing unbounded), and selects what is left each time, so a
step that is interrupted or run again picks up where it stopped and a finished one is a no-op.
"""

import logging
from collections import Counter
from contextlib import ExitStack

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.pipeline.locks import WorkOf, advisory_lock, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import tasks_cancel
from apps.privacy.services.skills import skills_release_subject
from apps.privacy.services.subjects import Subject
from apps.profiles.services.compile import profiles_clear_for_recompile
from apps.providers.models import LLMUsage
from apps.tenancy.models import Client
from apps.tenancy.services import client_revoke_keys, client_set_status

logger = logging.getLogger(__name__)


def delete_in_batches(queryset, *, batch_size: int | None = None) -> int:
    """Deletes the rows of `queryset` batch by batch; returns how many rows of its model went."""
    batch_size = batch_size or settings.ERASURE_BATCH_SIZE
    model, label, total = queryset.model, queryset.model._meta.label, 0
    while True:
        with transaction.atomic():
            ids = list(queryset.values_list("pk", flat=True)[:batch_size])
            _, per_model = model.objects.filter(pk__in=ids).delete()
        total += per_model.get(label, 0)
        if len(ids) < batch_size:
            return total


# The steps ------------------------------------------------------------------------------------


def stop_tasks(subject: Subject, erasure_id) -> dict:
    """First, so no worker starts embedding, extracting or distilling what is being erased."""
    return {"pipeline.MemoryTask (cancelled)": _cancel_and_scrub(subject.tasks(), erasure_id)}


def purge_skills(subject: Subject, erasure_id) -> dict:
    """Skills before experiences: what happens to a skill depends on who its sources were."""
    counts = skills_release_subject(subject=subject, actor=f"privacy:erasure:{erasure_id}")
    counts["skills.SkillExperience"] = delete_in_batches(subject.experiences())
    return counts


def purge_profiles(subject: Subject, erasure_id) -> dict:
    """Compiled memory, before the items it cites are gone: a user's entities and pages go with
    them; other pages lose every revision and source that quotes the subject, their text is
    cleared and they are recompiled from what remains (apps.profiles)."""
    counts = {"profiles.Entity": delete_in_batches(subject.entities())}
    counts["profiles.Mention"] = delete_in_batches(subject.mentions())
    counts["profiles.ProfileRevision"] = delete_in_batches(subject.quoting_revisions())
    affected = list(subject.profile_sources().values_list("profile_id", flat=True).distinct())
    counts["profiles.ProfileSource"] = delete_in_batches(subject.profile_sources())
    counts["profiles.Profile (cleared, recompiling)"] = profiles_clear_for_recompile(
        profile_ids=affected, reason=f"Sources erased by erasure {erasure_id}; the page is being recompiled."
    )
    return counts


def purge_memories(subject: Subject, erasure_id) -> dict:
    """Episodic and semantic memories and their history rows (apps.memories)."""
    return {label: delete_in_batches(queryset) for label, queryset in subject.memory_querysets()}


def purge_conversations(subject: Subject, erasure_id) -> dict:
    """Turns (with their embeddings and search vectors), idempotency records, then sessions."""
    return {
        "conversations.Message": delete_in_batches(subject.messages()),
        "conversations.IngestRequest": delete_in_batches(subject.ingest_requests()),
        "conversations.Session": delete_in_batches(subject.sessions()),
    }


def purge_tasks(subject: Subject, erasure_id) -> dict:
    """Tasks that still name an erased row: finished ones go (with their LLM usage rows), waiting
    ones are cancelled with their payloads emptied; running ones finish on their own and the
    verification sends the erasure round again."""
    counts = Counter()
    for queryset in (subject.tasks(), subject.orphaned_tasks()):
        finished = queryset.exclude(status__in=MemoryTask.ACTIVE_STATUSES)
        batch_size = settings.ERASURE_BATCH_SIZE
        while True:
            with transaction.atomic():
                ids = list(finished.values_list("pk", flat=True)[:batch_size])
                counts["providers.LLMUsage"] += LLMUsage.objects.filter(task_id__in=ids).delete()[0]
                counts["pipeline.MemoryTask"] += MemoryTask.objects.filter(pk__in=ids).delete()[0]
            if len(ids) < batch_size:
                break
        counts["pipeline.MemoryTask (cancelled)"] += _cancel_and_scrub(queryset, erasure_id)
    return dict(counts)


def purge_access(subject: Subject, erasure_id) -> dict:
    """Last: the EndUser row (a user erasure) or the client's keys and status (a client erasure;
    the Client row stays, disabled, as the subject of the audit trail)."""
    if subject.kind == "user":
        return {"tenancy.EndUser": delete_in_batches(subject.end_users())}
    counts = {"tenancy.ClientAPIKey (revoked)": 0, "tenancy.Client (disabled)": 0}
    if subject.client is not None:
        counts["tenancy.ClientAPIKey (revoked)"] = client_revoke_keys(client=subject.client)
        if subject.client.status != Client.Status.DISABLED:
            client_set_status(client=subject.client, status=Client.Status.DISABLED)
            counts["tenancy.Client (disabled)"] = 1
    return counts


STEPS = [stop_tasks, purge_skills, purge_profiles, purge_memories, purge_conversations, purge_tasks, purge_access]


def _cancel_and_scrub(queryset, erasure_id) -> int:
    """Cancels waiting tasks through the pipeline, then empties the payload and idempotency key
    (which embed the erased rows' ids) of every cancelled one."""
    ids = list(queryset.filter(status__in=MemoryTask.CLAIMABLE_STATUSES).values_list("pk", flat=True))
    cancelled = 0
    for start in range(0, len(ids), settings.ERASURE_BATCH_SIZE):
        with transaction.atomic():
            batch = MemoryTask.objects.filter(pk__in=ids[start : start + settings.ERASURE_BATCH_SIZE])
            cancelled += tasks_cancel(queryset=batch)
    with transaction.atomic():
        queryset.filter(status=MemoryTask.Status.CANCELLED).update(
            payload={}, idempotency_key=None, result=None, error=f"Cancelled by erasure {erasure_id}.",
            updated_at=timezone.now(),
        )
    return cancelled


def subject_locks(subject: Subject) -> list[str]:
    """Every lock the apps registered (pipeline.locks.register_work_locks) for the subject's user and
    the scopes their experiences live in: while the purge runs no work on them can start (it takes
    the same locks without waiting, and retries), and the purge waits for work already running."""
    work = WorkOf(
        organization_id=subject.organization.pk,
        end_user_ids=(subject.end_user.pk,) if subject.end_user is not None else (),
        scopes=tuple(sorted(set(subject.experiences().values_list("scope", flat=True)))),
    )
    return work_lock_keys(work)


def subject_purge(*, subject: Subject, erasure_id, on_step=None) -> dict:
    """Runs every step; returns the counts per table. `on_step(counts)` sees the progress."""
    counts: Counter = Counter()
    with ExitStack() as locks:
        for key in subject_locks(subject):
            locks.enter_context(advisory_lock(key))
        for step in STEPS:
            for table, count in step(subject, erasure_id).items():
                counts[table] += count
            logger.info("erasure %s: %s done", erasure_id, step.__name__)
            if on_step is not None:
                on_step(dict(counts))
    return dict(counts)
