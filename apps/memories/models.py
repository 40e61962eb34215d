"""Conversation memory: episodic memories (dated events) and semantic memories (facts about
people, things, preferences) extracted from conversation sessions, each with its change history."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField, DateRangeField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from apps.core.models import BaseModel, search_indexes

ACTOR_MAX_LENGTH = 255
EVENT_TYPE_MAX_LENGTH = 64
NAME_MAX_LENGTH = 255
SUMMARY_MAX_LENGTH = 1000
DETAILS_MAX_LENGTH = 4000


class TimeGranularity(models.TextChoices):
    """How precisely `occurred_at` is known: the event happened somewhere in that day, week, ..."""

    EXACT = "exact", "Exact time"
    DAY = "day", "Day"
    WEEK = "week", "Week"
    MONTH = "month", "Month"
    YEAR = "year", "Year"


class Memory(BaseModel):
    """What both memory types share: tenant, scope and owner, provenance, vectors, soft deletion."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="+")
    # The client whose session first taught it (erasure of a client's data follows this).
    created_by = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # Message ids, not foreign keys: retention prunes turns, the memory learned from them stays.
    source_message_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    summary = models.TextField()
    details = models.TextField(blank=True, default="")
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")
    deleted_at = models.DateTimeField(
        null=True, blank=True, help_text="Set when extraction deleted it: hidden from search, purged after retention."
    )
    date_span = DateRangeField(
        null=True,
        blank=True,
        help_text="The days its text's date expressions refer to, first to last (normalize_dates); null: none.",
    )

    class Meta:
        abstract = True

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None


class EpisodicMemory(Memory):
    """A dated event in the user's life: who did what, when."""

    occurred_at = models.DateTimeField(
        help_text="Absolute and timezone-aware; relative dates are resolved at extraction."
    )
    time_granularity = models.CharField(max_length=8, choices=TimeGranularity.choices, default=TimeGranularity.DAY)
    actor = models.CharField(max_length=ACTOR_MAX_LENGTH, blank=True, default="")
    event_type = models.CharField(max_length=EVENT_TYPE_MAX_LENGTH, blank=True, default="")
    # The event itself weighs A; its details B (half, in the BM25 scoring).
    search_vector = models.GeneratedField(
        expression=SearchVector("actor", "event_type", "summary", config="english", weight="A")
        + SearchVector("details", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["-occurred_at"]
        verbose_name = "episodic memory"
        verbose_name_plural = "episodic memories"
        constraints = [
            models.CheckConstraint(
                condition=Q(time_granularity__in=["exact", "day", "week", "month", "year"]),
                name="episodic_time_granularity_valid",
            ),
            models.CheckConstraint(
                condition=~Q(summary=""),
                name="episodic_summary_not_empty",
                violation_error_message="An episodic memory needs a summary.",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "scope", "end_user", "-occurred_at"], name="episodic_user_recent_idx"),
            GinIndex(fields=["summary"], opclasses=["gin_trgm_ops"], name="episodic_summary_trgm_idx"),
            *search_indexes("episodic"),
        ]

    def __str__(self):
        return f"{self.occurred_at:%Y-%m-%d} {self.summary[:80]}"


class SemanticMemory(Memory):
    """A fact about someone or something (a person, a thing, a preference) that holds over time."""

    name = models.CharField(max_length=NAME_MAX_LENGTH, help_text="The subject: a person, a thing, a preference.")
    source = models.CharField(
        max_length=255, blank=True, default="", help_text='Where it was learned, e.g. "conversation on 2023-05-08".'
    )
    key = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The caller's own key for a memory it stores directly (a LangGraph store item's), unique per "
        "user and scope: storing under it again replaces the memory.",
    )
    search_vector = models.GeneratedField(
        expression=SearchVector("name", "summary", config="english", weight="A")
        + SearchVector("details", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["name", "-updated_at"]
        verbose_name = "semantic memory"
        verbose_name_plural = "semantic memories"
        constraints = [
            models.CheckConstraint(
                condition=~Q(name="") & ~Q(summary=""),
                name="semantic_name_and_summary_not_empty",
                violation_error_message="A semantic memory needs a name and a summary.",
            ),
            models.UniqueConstraint(
                fields=["organization", "scope", "end_user", "key"],
                condition=~Q(key=""),
                name="semantic_key_unique_per_user_and_scope",
                violation_error_message="This key is already stored for the user in this scope.",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "scope", "end_user", "name"], name="semantic_user_name_idx"),
            # The fuzzy method's trigram index is on its expression (apps/memories/search.py): see migrations.
            *search_indexes("semantic"),
        ]

    def __str__(self):
        return f"{self.name}: {self.summary[:80]}"


class MemoryChange(BaseModel):
    """One change of a memory: the value before and after it, who made it and why; a diff is computed for display."""

    class Operation(models.TextChoices):
        ADD = "add", "Add"
        UPDATE = "update", "Update"
        DELETE = "delete", "Delete"

    operation = models.CharField(max_length=8, choices=Operation.choices)
    previous_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=255, help_text='e.g. "extraction:llm:gpt-4o-mini", "admin:alice".')
    reason = models.TextField(blank=True, default="")
    # The MemoryTask id, not a foreign key: history outlives pruned task rows.
    task_id = models.UUIDField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]


def _history_rules(memory_type: str) -> tuple[list, list]:
    """The constraints and indexes of a memory type's history table, alike for both types."""
    operations = models.CheckConstraint(
        condition=Q(operation__in=MemoryChange.Operation.values), name=f"{memory_type}_change_operation_valid"
    )
    return [operations], [models.Index(fields=["memory", "-created_at"], name=f"{memory_type}_change_memory_idx")]


class EpisodicMemoryChange(MemoryChange):
    memory = models.ForeignKey(EpisodicMemory, on_delete=models.CASCADE, related_name="history")

    class Meta(MemoryChange.Meta):
        verbose_name = "episodic memory change"
        constraints, indexes = _history_rules("episodic")


class SemanticMemoryChange(MemoryChange):
    memory = models.ForeignKey(SemanticMemory, on_delete=models.CASCADE, related_name="history")

    class Meta(MemoryChange.Meta):
        verbose_name = "semantic memory change"
        constraints, indexes = _history_rules("semantic")
