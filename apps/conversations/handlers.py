"""Pipeline handlers of this app."""

from django.db import transaction

from apps.conversations.models import Message
from apps.conversations.routing import EMBED_MESSAGES
from apps.conversations.services.dates import DATED_FIELDS, message_apply_dates
from apps.conversations.services.deletion import contexts_refreshed
from apps.conversations.services.sessions import sessions_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.providers.embeddings import embed_texts, embedding_model_name

EMBED_BATCH_SIZE = 64


@register_handler(EMBED_MESSAGES, priority=MemoryTask.Priority.URGENT)
def handle_embed_messages(task) -> dict:
    """Indexes the turns of one add: dates, neighbour context and embeddings (idempotent)."""
    session_id, first, last = task.payload["session"], task.payload["from_seq"], task.payload["to_seq"]
    # Under the session's lock, so a turn deleted meanwhile is not copied into a neighbour's context.
    with transaction.atomic():
        sessions_lock(session_ids=[session_id])
        # One turn on each side: the turn before this batch gains a following neighbour now.
        window = list(
            Message.objects.filter(session_id=session_id, seq__gte=first - 2, seq__lte=last + 1)
            .only(*DATED_FIELDS, "seq", "name", "embedding_model")
            .order_by("seq")
        )
        dated = [message for message in window if first <= message.seq <= last and message_apply_dates(message)]
        by_place = {(message.session_id, message.seq): message for message in window}
        changed_context = contexts_refreshed(by_place, [place for place in by_place if first - 1 <= place[1] <= last])
        changed = list({message.pk: message for message in [*dated, *changed_context]}.values())
        Message.objects.bulk_update(changed, ["context", "metadata", "date_span"])

    model = embedding_model_name()
    pending = [message for message in window if first <= message.seq <= last and message.embedding_model != model]
    for start in range(0, len(pending), EMBED_BATCH_SIZE):
        batch = pending[start : start + EMBED_BATCH_SIZE]
        for message, vector in zip(batch, embed_texts([message.embedding_text() for message in batch])):
            message.embedding = vector
            message.embedding_model = model
        Message.objects.bulk_update(batch, ["embedding", "embedding_model"])
    return {"embedded": len(pending), "contexts": len(changed_context), "dated": len(dated), "model": model}
