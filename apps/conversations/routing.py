"""The background work a session's events route to, by session_tag: task types and keys defined once,
handled by the apps that register under these names."""

import logging

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.conversations.models import Session
from apps.core.models import SessionTag
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import HANDLERS
from apps.pipeline.services import enqueue, enqueue_debounced, task_run_sooner

logger = logging.getLogger(__name__)

EMBED_MESSAGES = "embed_messages"
EXTRACT_MEMORIES = "extract_memories"
PROJECT_ENTITIES = "project_entities"
DISTILL_SESSION = "distill_session"
# The purge of one session (apps.privacy.services.cascade); while it waits, the session reads as gone.
DELETE_SESSION = "delete_session"


def session_delete_key(session_pk) -> str:
    """The idempotency key of a session's purge: one per session while it is active."""
    return f"{DELETE_SESSION}:{session_pk}"


def _handled(task_type: str) -> bool:
    """Routing points enqueue only work some app can do, so no row waits for a missing handler."""
    if task_type not in HANDLERS:
        logger.debug("no handler for %s yet; nothing enqueued", task_type)
        return False
    return True


def _enqueue_if_handled(task_type: str, payload: dict, *, session, client=None, **options) -> MemoryTask | None:
    """A task carrying the session's organisation and scope and the client whose request caused it."""
    if not _handled(task_type):
        return None
    return enqueue(task_type, payload, organization=session.organization, scope=session.scope, client=client, **options)


# A debounced type's key prefix and its delay in EXTRACTION_DEBOUNCE_SECONDS: entity projection reads
# what extraction learns, so it waits out twice extraction's debounce.
DEBOUNCED = {EXTRACT_MEMORIES: ("extract", 1), PROJECT_ENTITIES: ("project", 2)}


def _enqueue_debounced(task_type: str, session, *, client=None) -> MemoryTask | None:
    """One pending task of this type per session, its delay out while it is open; due at once
    (a waiting one brought forward) when it is sealed, since nothing will join it."""
    if not _handled(task_type):
        return None
    sealed = session.status == Session.Status.SEALED
    prefix, delays = DEBOUNCED[task_type]
    task = enqueue_debounced(
        task_type,
        {"session": str(session.pk)},
        key=f"{prefix}:{session.pk}",
        delay=0 if sealed else delays * settings.EXTRACTION_DEBOUNCE_SECONDS,
        organization=session.organization,
        scope=session.scope,
        client=client,
    )
    if sealed and task.run_after > (now := timezone.now()):  # one that was waiting for more turns
        task_run_sooner(task=task, run_after=now)
    return task


def embedding_enqueue(session, *, from_seq: int, to_seq: int, client=None) -> MemoryTask | None:
    """A conversation's turns are searched while the person talks: indexed first. A task session's wait
    behind learning: its users wait for the skill, and its long tool output is costliest to embed."""
    return _enqueue_if_handled(
        EMBED_MESSAGES,
        {"session": str(session.pk), "from_seq": from_seq, "to_seq": to_seq},
        session=session,
        client=client,
        priority=None if session.session_tag == SessionTag.CONVERSATION else MemoryTask.Priority.COMPILE,
    )


def extraction_enqueue(session, *, client=None) -> MemoryTask | None:
    return _enqueue_debounced(EXTRACT_MEMORIES, session, client=client)


def projection_enqueue(session, *, client=None) -> MemoryTask | None:
    return _enqueue_debounced(PROJECT_ENTITIES, session, client=client)


def extraction_pending_until(session):
    """When the session's active memory extraction is due, or None when there is none."""
    return (
        MemoryTask.objects.filter(
            task_type=EXTRACT_MEMORIES, payload__session=str(session.pk), status__in=MemoryTask.ACTIVE_STATUSES
        )
        .order_by("run_after")
        .values_list("run_after", flat=True)
        .first()
    )


def projection_pending(*, organization_id, end_user_id) -> bool:
    """Whether a projection of one of the user's sessions is running, due, or waiting for its
    extraction (not one still in its debounce)."""
    session_ids = MemoryTask.objects.filter(
        Q(status=MemoryTask.Status.RUNNING)
        | Q(status__in=MemoryTask.CLAIMABLE_STATUSES)
        & (Q(run_after__lte=timezone.now()) | Q(timings__has_key="first_claimed_at")),
        task_type=PROJECT_ENTITIES,
    ).values_list("payload__session", flat=True)
    return Session.objects.filter(
        pk__in=list(session_ids), organization_id=organization_id, end_user_id=end_user_id
    ).exists()


def distillation_enqueue(session, *, client=None) -> MemoryTask | None:
    """One distillation per session, whether sealing or a caller asked for it."""
    return _enqueue_if_handled(
        DISTILL_SESSION,
        {"session": str(session.pk)},
        session=session,
        client=client,
        idempotency_key=f"distill:{session.pk}",
    )
