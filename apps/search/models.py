"""Vectors of the next embedding model, kept aside while searches still use the current one."""

from django.conf import settings
from django.db import models
from pgvector.django import VectorField

from apps.core.models import BaseModel


class StagedEmbedding(BaseModel):
    """One item's vector by `model`, staged by `reembed` (no text, no tenant) until the switch writes it
    into the item and deletes it."""

    memory_type = models.CharField(max_length=32)
    item_id = models.UUIDField()
    model = models.CharField(max_length=128)
    # sha256 of the text that was embedded: an item edited since then is embedded again.
    text_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory_type", "model", "item_id"],
                name="staged_embedding_unique",
                violation_error_message="An item has one staged vector per model.",
            )
        ]

    def __str__(self):
        return f"{self.memory_type} {self.item_id} ({self.model})"
