"""Writes of the search app: re-embedding stored items after a change of embedding model."""

from collections.abc import Iterator

from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.search.registry import SearchSource


def source_reembed(*, source: SearchSource, batch_size: int = 256) -> Iterator[tuple[int, int]]:
    """Re-embeds every item of a type whose vector was made by another model than the current one.

    Yields (done, total) after each batch, so a caller can show progress; safe to interrupt
    and run again, since finished rows carry the new model's name.
    """
    model = embedding_model_name()
    column = source.embedding_column
    stale = source.model.objects.exclude(embedding_model=model).defer(column, source.search_vector_column)
    total = stale.count()
    done = 0
    while done < total:
        batch = list(stale.order_by("pk")[:batch_size])
        if not batch:
            break
        for item, vector in zip(batch, embed_texts([source.embedding_text(item) for item in batch])):
            setattr(item, column, vector)
            item.embedding_model = model
        source.model.objects.bulk_update(batch, [column, "embedding_model"])
        done += len(batch)
        yield done, total
