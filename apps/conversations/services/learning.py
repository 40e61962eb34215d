"""The marks other apps leave on the sessions and turns they learned from, and the check of those marks."""

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.core.events import SESSION_LEARNED, emit_event

# `check(session) -> str`: why the session counts as learned from by the rows an app derives from its
# turns ("" if none), registered from that app's ready(); asked in the order the apps are installed.
_LEARNED_FROM: list[Callable[[Session], str]] = []


LEARNING_BUSY = "Learning from this user's sessions is running right now; try again shortly."


def register_learned_from(check: Callable[[Session], str]) -> None:
    if check not in _LEARNED_FROM:
        _LEARNED_FROM.append(check)


def session_learned_from(session: Session) -> str:
    """Why the session counts as learned from ("" if not): rows the apps derived, then learning's marks."""
    if why := next(filter(None, (check(session) for check in _LEARNED_FROM)), ""):
        return why
    if session.distilled_at:
        return "it was distilled"
    if session.extracted_at or Message.objects.filter(session=session, learned_at__isnull=False).exists():
        return "its turns were extracted"
    return ""


LEARNED_BY = {"distillation": "distilled_at", "extraction": "extracted_at"}


def messages_lock_unlearned(*, message_ids: list) -> bool:
    """Locks the turns for the caller's transaction; False when some run learned from one of them meanwhile."""
    learned = (
        Message.objects.select_for_update()
        .filter(pk__in=message_ids)
        .order_by("pk")
        .values_list("learned_at", flat=True)
    )
    return all(learned_at is None for learned_at in learned)


def messages_mark_learned(
    *,
    session: Session,
    by: Literal["distillation", "extraction"],
    message_ids: list | None = None,
    through_seq: int | None = None,
) -> datetime:
    """Marks the session distilled or extracted and its unlearned turns (all, `message_ids`, or up to
    `through_seq`) learned from now, in the transaction storing what was learned (retention needs it)."""
    field = LEARNED_BY[by]
    now = timezone.now()
    turns = Message.objects.filter(session=session, learned_at__isnull=True)
    if message_ids is not None:
        turns = turns.filter(pk__in=message_ids)
    if through_seq is not None:
        turns = turns.filter(seq__lte=through_seq)
    turns.update(learned_at=now)
    Session.objects.filter(pk=session.pk).update(**{field: now, "updated_at": now})
    setattr(session, field, now)
    return now


def session_announce_learned(*, session: Session, by: Literal["distillation", "extraction"], **counts) -> None:
    """Tells listeners (webhooks) a session's learning finished, in the transaction marking its last
    turns learned; `counts`: small numbers of what was learned."""
    emit_event(
        SESSION_LEARNED,
        organization_id=session.organization_id,
        data={
            "session_id": session.session_id,
            "user_id": session.end_user.user_id,
            "scope": session.scope,
            "session_tag": session.session_tag,
            "learned_by": by,
            **counts,
        },
    )


def messages_mark_unlearned(*, turns) -> list:
    """Turns whose learned product was deleted are learned from again next time; returns their sessions."""
    session_ids = list(turns.order_by().values_list("session_id", flat=True).distinct())
    turns.update(learned_at=None)
    return session_ids
