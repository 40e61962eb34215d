"""Deleting turns (deletion, erasure, retention): their neighbours' context and their sessions' counts follow."""

from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.conversations.services.dates import context_with_dates
from apps.conversations.services.sessions import sessions_lock

CONTEXT_MAX_CHARS = 2000


def neighbour_context(previous: Message | None, following: Message | None, metadata: dict) -> str:
    """A turn's stored `context`: its neighbours' text (seq ± 1) and its date line; the one rule for it."""
    parts = [neighbour.embedding_text()[:CONTEXT_MAX_CHARS] for neighbour in (previous, following) if neighbour]
    return context_with_dates("\n".join(parts), metadata)


def contexts_refreshed(window: dict, places) -> list[Message]:
    """The turns of `window` ({(session id, seq): turn}) at `places` whose neighbour context changed, set anew."""
    changed = []
    for session_id, seq in places:
        message = window.get((session_id, seq))
        if message is None:
            continue
        context = neighbour_context(
            window.get((session_id, seq - 1)), window.get((session_id, seq + 1)), message.metadata
        )
        if context != message.context:
            message.context = context
            changed.append(message)
    return changed


def _refresh_neighbours(*, places: set[tuple]) -> int:
    """Recomputes the context of the surviving turns at `places` ((session id, seq) pairs)."""
    if not places:
        return 0
    candidates = Message.objects.filter(
        session_id__in={session_id for session_id, _ in places},
        seq__in={seq + step for _, seq in places for step in (-1, 0, 1)},
    ).only("id", "session_id", "seq", "role", "name", "content", "context", "metadata")
    window = {(message.session_id, message.seq): message for message in candidates}
    changed = contexts_refreshed(window, places)
    Message.objects.bulk_update(changed, ["context"])
    return len(changed)


@transaction.atomic
def messages_delete(*, message_ids) -> dict:
    """Deletes turns under their sessions' locks: their neighbours' contexts lose their text and each
    session's count drops. Returns {"deleted": n, "contexts": n}."""
    rows = list(Message.objects.filter(pk__in=list(message_ids)).values_list("pk", "session_id", "seq"))
    if not rows:
        return {"deleted": 0, "contexts": 0}
    sessions_lock(session_ids={session_id for _, session_id, _ in rows})
    _, per_model = Message.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    gone = {(session_id, seq) for _, session_id, seq in rows}
    contexts = _refresh_neighbours(
        places={(session_id, seq + step) for session_id, seq in gone for step in (-1, 1)} - gone
    )
    counts = Counter(session_id for _, session_id, _ in rows)
    for count in dict.fromkeys(counts.values()):  # one UPDATE per distinct count
        session_ids = [session_id for session_id, n in counts.items() if n == count]
        Session.objects.filter(pk__in=session_ids).update(
            message_count=Greatest(F("message_count") - count, Value(0)), updated_at=timezone.now()
        )
    return {"deleted": per_model.get(Message._meta.label, 0), "contexts": contexts}


def messages_prune_learned(*, cutoff: datetime, batch_size: int) -> Counter:
    """Deletes, batch by batch, the turns learned from before `cutoff` of sessions learned from before
    it (never an unlearned turn); returns the count per organisation id."""
    learned = Session.objects.filter(Q(distilled_at__lt=cutoff) | Q(extracted_at__lt=cutoff))
    prunable = Message.objects.filter(session__in=learned.values("pk"), learned_at__isnull=False, learned_at__lt=cutoff)
    per_organization: Counter = Counter()
    while True:
        rows = list(prunable.values_list("pk", "organization_id")[:batch_size])
        messages_delete(message_ids=[row[0] for row in rows])
        per_organization.update(str(row[1]) for row in rows)
        if len(rows) < batch_size:
            return per_organization
