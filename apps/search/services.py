"""Moving stored items to another embedding model (`reembed`) in two steps, so the current vectors
serve until the new ones are complete: `source_stage` embeds into StagedEmbedding, `stage_swap` switches."""

import hashlib
from collections.abc import Iterator

from django.db import connection, transaction

from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.search.models import StagedEmbedding
from apps.search.registry import SearchSource


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def source_stage(*, source: SearchSource, batch_size: int = 256) -> Iterator[tuple[int, int, int]]:
    """Stages a vector by the configured model for every item of a type another model embedded, yielding
    (done, total, embedded) per batch; resumable (an item staged with its current text is skipped)."""
    model = embedding_model_name()
    stale = (
        source.model.objects.filter(**dict(source.rows))
        .exclude(embedding_model=model)
        .defer(source.embedding_column, source.search_vector_column)
    )
    total = stale.count()
    done = embedded = 0
    batch = list(stale.order_by("pk")[:batch_size])
    while batch:
        texts = {item.pk: source.embedding_text(item) for item in batch}
        staged = dict(
            StagedEmbedding.objects.filter(
                memory_type=source.memory_type, model=model, item_id__in=list(texts)
            ).values_list("item_id", "text_hash")
        )
        missing = [pk for pk, text in texts.items() if staged.get(pk) != _text_hash(text)]
        if missing:
            vectors = embed_texts([texts[pk] for pk in missing])
            StagedEmbedding.objects.bulk_create(
                [
                    StagedEmbedding(
                        memory_type=source.memory_type,
                        item_id=pk,
                        model=model,
                        text_hash=_text_hash(texts[pk]),
                        embedding=vector,
                    )
                    for pk, vector in zip(missing, vectors)
                ],
                update_conflicts=True,
                unique_fields=["memory_type", "model", "item_id"],
                update_fields=["text_hash", "embedding"],
            )
        done += len(batch)
        embedded += len(missing)
        yield done, max(total, done), embedded
        batch = list(stale.filter(pk__gt=batch[-1].pk).order_by("pk")[:batch_size])


@transaction.atomic
def stage_swap(*, sources: list[SearchSource]) -> dict[str, int]:
    """Writes the configured model's staged vectors into their items in one transaction and deletes
    the staged rows; returns the items switched per type."""
    model = embedding_model_name()
    switched = {}
    with connection.cursor() as cursor:
        for source in sources:
            table, column = source.model._meta.db_table, source.embedding_column
            rows = "".join(f" AND t.{connection.ops.quote_name(name)} = %s" for name, _ in source.rows)
            cursor.execute(
                f"UPDATE {table} t SET {column} = s.embedding, embedding_model = s.model"
                f" FROM {StagedEmbedding._meta.db_table} s"
                f" WHERE s.memory_type = %s AND s.model = %s AND s.item_id = t.id AND t.embedding_model <> %s{rows}",
                [source.memory_type, model, model, *(value for _, value in source.rows)],
            )
            switched[source.memory_type] = cursor.rowcount
    StagedEmbedding.objects.filter(model=model, memory_type__in=[source.memory_type for source in sources]).delete()
    return switched
