"""Writes of a session as a whole: sealing, retagging, outcome, hand-over, deletion requests and locks."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.conversations.routing import DELETE_SESSION, TAG_WORK, SessionEvent, session_delete_key, session_work
from apps.conversations.services.learning import LEARNING_BUSY, session_learned_from
from apps.core.errors import ConflictError
from apps.pipeline.locks import LockNotAvailable, WorkOf, advisory_locks, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue, tasks_cancel


def session_seal(*, session: Session, client=None) -> list[MemoryTask]:
    """Seals a session and queues what sealing sets off under its tag (apps.conversations.routing)."""
    if session.status == Session.Status.SEALED:
        return []
    session.status = Session.Status.SEALED
    session.sealed_at = timezone.now()
    session.save(update_fields=["status", "sealed_at", "updated_at"])
    return session_work(session, event=SessionEvent.SEAL, client=client)


@transaction.atomic
def session_seal_now(*, session: Session, client=None) -> list[MemoryTask]:
    session = Session.objects.select_for_update().get(pk=session.pk)
    return session_seal(session=session, client=client)


def session_retag(*, session: Session, session_tag: str, client=None) -> Session:
    """Moves a session not yet learned from to the other tag's work (the old tag's is cancelled), under
    the owner's work locks so no learning runs meanwhile; 409 once learned from or while they are busy."""
    keys = work_lock_keys(
        WorkOf(organization_id=session.organization_id, end_user_ids=(session.end_user_id,), scopes=(session.scope,))
    )
    try:
        with advisory_locks(keys, wait=False):
            return _session_retag_locked(session=session, session_tag=session_tag, client=client)
    except LockNotAvailable:
        raise ConflictError(LEARNING_BUSY) from None


@transaction.atomic
def _session_retag_locked(*, session: Session, session_tag: str, client) -> Session:
    if session.session_tag == session_tag:
        return session
    why = session_learned_from(session)
    if why:
        raise ConflictError(f"The session's tag can no longer change: {why}.")
    tasks_cancel(
        queryset=MemoryTask.objects.filter(
            task_type__in=TAG_WORK[session.session_tag].learning, payload__session=str(session.pk)
        )
    )
    session.session_tag = session_tag
    session.save(update_fields=["session_tag", "updated_at"])
    session_work(session, event=SessionEvent.RETAG, client=client)
    return session


def session_set_outcome(*, session: Session, outcome: str) -> Session:
    session.outcome = outcome
    session.save(update_fields=["outcome", "updated_at"])
    return session


def session_delete_request(*, session: Session, client) -> MemoryTask:
    """Queues the purge of one session (it may hold thousands of turns); apps.privacy handles it."""
    return enqueue(
        DELETE_SESSION,
        {"deleted_session": str(session.pk)},
        organization=session.organization,
        scope=session.scope,
        client=client,
        idempotency_key=session_delete_key(session.pk),
    )


def sessions_lock(*, session_ids) -> None:
    """Locks the session rows for the caller's transaction, always in the same order (no deadlock): indexing
    and every delete of turns take them, so a neighbour context is never computed from a turn being deleted."""
    list(
        Session.objects.select_for_update().filter(pk__in=list(session_ids)).order_by("pk").values_list("pk", flat=True)
    )


def session_hand_over(*, session: Session) -> bool:
    """Passes a session whose opener is erased to the writer of its earliest remaining turn, without the
    opener's filter tags; False when no turn is left (the caller deletes it)."""
    heir = Message.objects.filter(session=session).order_by("seq").values_list("created_by_id", flat=True).first()
    if heir is None:
        return False
    Session.objects.filter(pk=session.pk).update(
        client_id=heir, filter_tags={"scope": session.scope}, updated_at=timezone.now()
    )
    return True


def seal_idle_sessions(*, batch_size: int = 500) -> int:
    """Seals open sessions that received nothing for SESSION_IDLE_SECONDS."""
    cutoff = timezone.now() - timedelta(seconds=settings.SESSION_IDLE_SECONDS)
    sealed = 0
    while True:
        with transaction.atomic():
            idle = list(
                Session.objects.select_for_update(skip_locked=True)
                .select_related("organization")
                .filter(status=Session.Status.OPEN, last_message_at__lt=cutoff)[:batch_size]
            )
            for session in idle:
                session_seal(session=session)
        sealed += len(idle)
        if len(idle) < batch_size:
            return sealed
