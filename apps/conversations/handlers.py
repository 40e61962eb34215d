"""Pipeline handlers of this app."""

from apps.conversations.models import Message
from apps.pipeline.registry import register_handler
from apps.providers.embeddings import embed_texts, embedding_model_name

EMBED_BATCH_SIZE = 64


@register_handler("embed_messages")
def embed_messages(task) -> dict:
    """Embeds the turns of one add; idempotent: turns already embedded by this model are skipped."""
    model = embedding_model_name()
    pending = list(
        Message.objects.filter(
            session_id=task.payload["session"],
            seq__gte=task.payload["from_seq"],
            seq__lte=task.payload["to_seq"],
        )
        .exclude(embedding_model=model)
        .only("id", "content")
        .order_by("seq")
    )
    for start in range(0, len(pending), EMBED_BATCH_SIZE):
        batch = pending[start : start + EMBED_BATCH_SIZE]
        for message, vector in zip(batch, embed_texts([message.content for message in batch])):
            message.embedding = vector
            message.embedding_model = model
        Message.objects.bulk_update(batch, ["embedding", "embedding_model"])
    return {"embedded": len(pending), "model": model}
