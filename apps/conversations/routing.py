"""The background work a session's events route to, by session_tag: the whole rule (TAG_WORK and
session_work), and the task types and keys it queues, defined once and handled by the apps that register
under these names."""

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

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


def _embedding_enqueue(session, *, new_turns: "NewTurns", priority, client=None) -> MemoryTask | None:
    return _enqueue_if_handled(
        EMBED_MESSAGES,
        {"session": str(session.pk), "from_seq": new_turns.from_seq, "to_seq": new_turns.to_seq},
        session=session,
        client=client,
        priority=priority,
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


class SessionEvent(StrEnum):
    TURNS = "turns"  # turns were stored in an open session
    SEAL = "seal"  # the session was sealed (with the turns stored by the same request, if any)
    RETAG = "retag"  # the session moved to another tag (the old tag's pending learning is cancelled)


class NewTurns(NamedTuple):
    """The sequence numbers of the turns one request stored, first and last included."""

    from_seq: int
    to_seq: int


@dataclass(frozen=True)
class TagWork:
    learning: tuple[str, ...]  # the task types that learn from a session of this tag, in queueing order
    learns_while_open: bool  # queued (debounced) as turns arrive; otherwise only once the session is sealed
    embedding_priority: int | None  # of its new turns' embedding; None is the default priority


# The tag -> work rule, whole. Every tag's new turns are embedded; a conversation's are searched while the
# person talks, so indexed first, while a task session's wait behind learning (its users wait for the skill,
# and its long tool output is costliest to embed). A conversation is extracted and projected as it goes
# (due at once when sealed); a task session is distilled once sealed.
TAG_WORK = {
    SessionTag.CONVERSATION: TagWork(
        learning=(EXTRACT_MEMORIES, PROJECT_ENTITIES), learns_while_open=True, embedding_priority=None
    ),
    SessionTag.TASK: TagWork(
        learning=(DISTILL_SESSION,), learns_while_open=False, embedding_priority=MemoryTask.Priority.COMPILE
    ),
}

_LEARNING_ENQUEUE = {
    EXTRACT_MEMORIES: extraction_enqueue,
    PROJECT_ENTITIES: projection_enqueue,
    DISTILL_SESSION: distillation_enqueue,
}


def _learning_due(session, *, work: TagWork, event: SessionEvent) -> bool:
    if not work.learns_while_open:
        return session.status == Session.Status.SEALED
    if event == SessionEvent.SEAL:  # a sealed session whose turns were all erased has nothing to learn from
        return session.message_count > 0
    return True


def session_work(session, *, event: SessionEvent, client=None, new_turns: NewTurns | None = None) -> list[MemoryTask]:
    """Queues what `event` of `session` sets off under its tag (TAG_WORK): the embedding of `new_turns`,
    then the tag's learning when it is due. Returns the tasks queued, or joined when already pending."""
    work = TAG_WORK[session.session_tag]
    tasks = []
    if new_turns is not None:
        tasks.append(_embedding_enqueue(session, new_turns=new_turns, priority=work.embedding_priority, client=client))
    if _learning_due(session, work=work, event=event):
        tasks.extend(_LEARNING_ENQUEUE[task_type](session, client=client) for task_type in work.learning)
    return [task for task in tasks if task is not None]
