"""The abstract base every platform model inherits, the search indexes of every searchable table,
and the session tag every layer routes by."""

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex


class BaseModel(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def update_row(row: BaseModel, **fields) -> None:
    """Writes only `fields` and `updated_at`, in one UPDATE."""
    fields["updated_at"] = timezone.now()
    for name, value in fields.items():
        setattr(row, name, value)
    type(row).objects.filter(pk=row.pk).update(**fields)


def search_indexes(prefix: str) -> list:
    """GIN on `search_vector` and HNSW (cosine) on `embedding`, as every searchable table has them."""
    return [
        GinIndex(fields=["search_vector"], name=f"{prefix}_search_vector_idx"),
        HnswIndex(
            name=f"{prefix}_embedding_hnsw_idx",
            fields=["embedding"],
            m=16,
            ef_construction=64,
            opclasses=["vector_cosine_ops"],
        ),
    ]


class SessionTag(models.TextChoices):
    """Task sessions are distilled into skills, conversation sessions into episodic and semantic memories."""

    TASK = "task", "Task"
    CONVERSATION = "conversation", "Conversation"
