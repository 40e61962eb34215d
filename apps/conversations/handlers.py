"""Pipeline handlers of this app."""

from functools import reduce
from operator import or_

from django.db import transaction
from django.db.models import Q

from apps.conversations.models import Message
from apps.conversations.routing import EMBED_MESSAGES
from apps.conversations.services.dates import DATED_FIELDS, message_apply_dates
from apps.conversations.services.deletion import contexts_refreshed
from apps.conversations.services.sessions import sessions_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.providers.embeddings import embed_texts, embedding_model_name

EMBED_BATCH_SIZE = 64
# The turns several indexing tasks embed together at most (a single add may hold more): a batch stays
# well within the Celery time limits on a loaded machine.
EMBED_TOGETHER_TURNS = 4 * EMBED_BATCH_SIZE


def messages_embed(messages: list[Message], *, model: str) -> None:
    """Embeds the turns' texts, each distinct text once (a task session's system prompt, a tool output
    every trial repeats), EMBED_BATCH_SIZE texts a call, and stores the vectors. A turn deleted meanwhile
    is simply not updated."""
    by_text: dict[str, list[Message]] = {}
    for message in messages:
        by_text.setdefault(message.embedding_text(), []).append(message)
    texts = list(by_text)
    for start in range(0, len(texts), EMBED_BATCH_SIZE):  # stored call by call: a time limit loses one call
        batch = texts[start : start + EMBED_BATCH_SIZE]
        done = []
        for text, vector in zip(batch, embed_texts(batch)):
            for message in by_text[text]:
                message.embedding, message.embedding_model = vector, model
                done.append(message)
        Message.objects.bulk_update(done, ["embedding", "embedding_model"])


def embed_messages_together(tasks) -> int:
    """The turns of several indexing tasks (of any sessions) embedded in one go, before each task's own
    handler runs and finds them embedded; its dates and neighbour contexts stay each task's own work.
    Takes the first tasks whose adds hold at most EMBED_TOGETHER_TURNS turns (at least one task)."""
    taken, turns = 0, 0
    for task in tasks:
        turns += task.payload["to_seq"] - task.payload["from_seq"] + 1
        if taken and turns > EMBED_TOGETHER_TURNS:
            break
        taken += 1
    tasks = tasks[:taken]
    model = embedding_model_name()
    ranges = reduce(
        or_,
        (
            Q(session_id=task.payload["session"], seq__gte=task.payload["from_seq"], seq__lte=task.payload["to_seq"])
            for task in tasks
        ),
    )
    pending = list(
        Message.objects.filter(ranges)
        .exclude(embedding_model=model)
        .only("session_id", "seq", "role", "name", "content", "embedding_model")
    )
    if pending:
        messages_embed(pending, model=model)
    return taken


@register_handler(
    EMBED_MESSAGES, priority=MemoryTask.Priority.URGENT, batch=(embed_messages_together, "EMBED_BATCH_TASKS")
)
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
    if pending:
        messages_embed(pending, model=model)
    return {"embedded": len(pending), "contexts": len(changed_context), "dated": len(dated), "model": model}
