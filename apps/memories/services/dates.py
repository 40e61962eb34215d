"""The re-runnable date pass: turns and live memories re-dated from their words, batch by batch in key order,
so an interrupted run keeps what it wrote and a rerun writes only the rows whose dates moved.
"""

from collections.abc import Callable

from apps.conversations.models import Message
from apps.conversations.services.dates import messages_normalize_dates
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import EPISODIC, SEMANTIC, memories_normalize_dates
from apps.pipeline.services import enqueue

NORMALIZE_DATES = "normalize_dates"
MESSAGE = "message"
# How many changed ids of each type the result lists (the counts are always complete).
CHANGED_IDS_SHOWN = 100


def _rows(model, *, organization, scope: str | None, user_id: str | None):
    rows = model.objects.filter(organization=organization)
    if scope:
        rows = rows.filter(scope=scope)
    if user_id:
        rows = rows.filter(end_user__user_id=user_id)
    if model is not Message:
        rows = rows.filter(deleted_at__isnull=True)
    return rows


def _pages(rows, batch_size: int):
    """The rows' ids, batch by batch, in primary-key order (keyset: nothing held between batches)."""
    page = rows.order_by("pk")
    while ids := list(page.values_list("pk", flat=True)[:batch_size]):
        yield ids
        page = rows.order_by("pk").filter(pk__gt=ids[-1])


def dates_normalize(
    *,
    organization,
    scope: str | None = None,
    user_id: str | None = None,
    batch_size: int = 500,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Re-dates turns and memories; returns per type the rows read and changed, and the first changed ids.
    `on_progress(type, done, total)` is called after each batch."""
    passes = (
        (MESSAGE, Message, lambda ids: messages_normalize_dates(message_ids=ids)),
        (EPISODIC, EpisodicMemory, lambda ids: memories_normalize_dates(memory_type=EPISODIC, memory_ids=ids)),
        (SEMANTIC, SemanticMemory, lambda ids: memories_normalize_dates(memory_type=SEMANTIC, memory_ids=ids)),
    )
    result = {}
    for name, model, normalize in passes:
        rows = _rows(model, organization=organization, scope=scope, user_id=user_id)
        total = rows.count()
        counts = result[name] = {"read": 0, "changed": 0, "changed_ids": []}
        for ids in _pages(rows, batch_size):
            changed = normalize(ids)
            counts["read"] += len(ids)
            counts["changed"] += len(changed)
            room = CHANGED_IDS_SHOWN - len(counts["changed_ids"])
            counts["changed_ids"] += [str(pk) for pk in changed[:room]]
            if on_progress:
                on_progress(name, counts["read"], max(total, counts["read"]))
    result["changed"] = sum(result[name]["changed"] for name, _, _ in passes)
    return result


def dates_normalize_enqueue(*, organization, scope: str | None = None, user_id: str | None = None):
    """Queues the pass as a background task (one active per organisation, scope and user)."""
    return enqueue(
        NORMALIZE_DATES,
        {"scope": scope, "user_id": user_id},
        organization=organization,
        scope=scope,
        idempotency_key=f"{NORMALIZE_DATES}:{organization.pk}:{scope or ''}:{user_id or ''}",
    )
