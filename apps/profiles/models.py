"""Compiled memory: the entities a user's memory names, their mentions and co-occurrences, pages with provenance
and lint findings; all of it belongs to one (organisation, scope, end user), and goes with them.
"""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from apps.core.models import BaseModel, search_indexes

NAME_MAX_LENGTH = 255
QUOTE_MAX_CHARS = 500


class ItemType(models.TextChoices):
    MESSAGE = "message", "Message"
    EPISODIC = "episodic", "Episodic memory"
    SEMANTIC = "semantic", "Semantic memory"


class ItemCitation(models.Model):
    """A row citing one stored item (`item_type`, `item_id`): a mention or a profile source."""

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.item_type} {self.item_id}"


def _item_rules(owner: str, *, prefix: str, unique: str) -> tuple[list, list]:
    """The constraints and index of a row citing one item per `owner`: mentions and profile sources."""
    return [
        models.UniqueConstraint(fields=[owner, "item_type", "item_id"], name=unique),
        models.CheckConstraint(
            condition=Q(item_type__in=["message", "episodic", "semantic"]), name=f"{prefix}_item_type_valid"
        ),
    ], [models.Index(fields=["item_id"], name=f"{prefix}_item_idx")]


class Owned(BaseModel):
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="+")

    class Meta:
        abstract = True


class Entity(Owned):
    class Kind(models.TextChoices):
        PERSON = "person", "Person"
        PLACE = "place", "Place"
        ORGANIZATION = "organization", "Organisation"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.PERSON)
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    # Lower-cased names it goes by, the canonical one included; mentions are matched against them.
    aliases = ArrayField(models.CharField(max_length=NAME_MAX_LENGTH), default=list, blank=True)
    is_user = models.BooleanField(default=False, help_text="The end user themself.")
    mention_count = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "entities"
        ordering = ["-mention_count", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "end_user", "kind", "name"],
                name="entity_name_unique_per_owner",
                violation_error_message="This user's memory already has an entity of this kind and name.",
            ),
            models.CheckConstraint(condition=Q(kind__in=["person", "place", "organization"]), name="entity_kind_valid"),
            models.CheckConstraint(condition=~Q(name=""), name="entity_name_not_empty"),
        ]
        indexes = [
            models.Index(fields=["end_user", "organization", "scope", "kind"], name="entity_owner_idx"),
            GinIndex(fields=["aliases"], name="entity_aliases_idx"),
        ]

    def __str__(self):
        return self.name


class Mention(ItemCitation):
    """An entity named by a stored item (a turn, an episodic or a semantic memory)."""

    id = models.BigAutoField(primary_key=True)
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions")
    item_type = models.CharField(max_length=16, choices=ItemType.choices)
    # Ids, not foreign keys: retention and erasure delete items; lint finds what they left behind.
    item_id = models.UUIDField()
    session_id = models.UUIDField(null=True, blank=True)
    seq = models.PositiveIntegerField(null=True, blank=True, help_text="The turn's position in its session.")
    occurred_at = models.DateTimeField()
    spoken = models.BooleanField(default=False, help_text="The entity said it (the turn's speaker).")

    class Meta:
        constraints, indexes = _item_rules("entity", prefix="mention", unique="mention_unique_per_item")


class Edge(models.Model):
    """Two entities seen in the same item; `source` sorts before `target`, so a pair has one row."""

    EVIDENCE_KEPT = 20

    id = models.BigAutoField(primary_key=True)
    source = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="edges_out")
    target = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="edges_in")
    weight = models.PositiveIntegerField(default=0, help_text="Items they appear in together.")
    # The newest EVIDENCE_KEPT items: {"item_type", "item_id", "session_id", "seq"}.
    evidence = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-weight"]
        constraints = [
            models.UniqueConstraint(fields=["source", "target"], name="edge_unique_per_pair"),
            models.CheckConstraint(condition=Q(source__lt=models.F("target")), name="edge_source_before_target"),
        ]

    def __str__(self):
        return f"{self.source_id} -> {self.target_id}"


class Profile(Owned):
    """A compiled page of one user's memory: a person's (one per entity) or a topic's (one per cluster of items)."""

    class Kind(models.TextChoices):
        PERSON = "person", "Person"
        TOPIC = "topic", "Topic"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        ARCHIVED = "archived", "Archived (every source is gone)"

    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.PERSON)
    entity = models.OneToOneField(Entity, on_delete=models.CASCADE, related_name="profile", null=True, blank=True)
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    markdown = models.TextField(blank=True, default="")
    revision = models.PositiveIntegerField(default=0)
    # [{"item_type", "item_id"}] of `sources`, kept on the row so a search hit carries them without a query.
    source_refs = models.JSONField(default=list, blank=True)
    compiled_at = models.DateTimeField(null=True, blank=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("name", config="english", weight="A")
        + SearchVector("markdown", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["active", "archived"]), name="profile_status_valid"),
            models.CheckConstraint(
                condition=Q(kind="person", entity__isnull=False) | Q(kind="topic", entity__isnull=True),
                name="profile_kind_matches_entity",
                violation_error_message="A person page belongs to an entity; a topic page to none.",
            ),
        ]
        indexes = [
            models.Index(fields=["end_user", "organization", "scope", "name"], name="profile_owner_idx"),
            models.Index(fields=["end_user", "organization", "scope", "kind", "status"], name="profile_owner_kind_idx"),
            *search_indexes("profile"),
        ]

    def __str__(self):
        return f"{self.name} ({self.end_user_id})"

    def embedding_text(self) -> str:
        """What the page's vector encodes, at compilation and at re-embedding alike."""
        return f"{self.name}\n{self.markdown}"


class ProfileSource(ItemCitation):
    """One item the current text of a profile quotes: the provenance lint joins against."""

    id = models.BigAutoField(primary_key=True)
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="sources")
    item_type = models.CharField(max_length=16, choices=ItemType.choices)
    item_id = models.UUIDField()
    quote = models.TextField(blank=True, default="")

    class Meta:
        constraints, indexes = _item_rules("profile", prefix="profile_source", unique="profile_source_unique")


class ProfileRevision(BaseModel):
    """Every compiled text of a profile, with what made it and what it quoted."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    markdown = models.TextField(blank=True, default="")
    model = models.CharField(max_length=128, help_text='"rules" offline, else the LLM model name.')
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # [{"item_type", "item_id", "quote"}] as they were when this revision was compiled.
    sources = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["profile", "number"], name="profile_revision_number_unique")]


class LintFinding(BaseModel):
    class Kind(models.TextChoices):
        STALE = "stale", "Stale: some sources are gone"
        ORPHAN = "orphan", "Orphan: every source is gone"
        CONTRADICTION = "contradiction", "Contradiction with another page"

    class Severity(models.TextChoices):
        INFO = "info", "Info"
        WARNING = "warning", "Warning"
        ERROR = "error", "Error"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        RESOLVED = "resolved", "Resolved"

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="findings")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    detail = models.TextField(blank=True, default="")
    peer = models.ForeignKey(Profile, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    resolved_by = models.CharField(max_length=255, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["status", "-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["stale", "orphan", "contradiction"]), name="lint_finding_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(severity__in=["info", "warning", "error"]), name="lint_finding_severity_valid"
            ),
            models.CheckConstraint(condition=Q(status__in=["open", "resolved"]), name="lint_finding_status_valid"),
            models.CheckConstraint(
                condition=Q(status="open") | Q(resolved_at__isnull=False), name="lint_finding_resolved_has_time"
            ),
        ]
        indexes = [models.Index(fields=["status", "kind", "-created_at"], name="lint_finding_queue_idx")]

    def __str__(self):
        return f"{self.kind} {self.profile}"


class TopicState(Owned):
    """When one user's topic pages were last compiled: the count-and-age trigger counts from here."""

    compiled_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "end_user"],
                name="topic_state_unique_per_owner",
                violation_error_message="This user's topics already have a state row.",
            ),
        ]

    def __str__(self):
        return f"topics of {self.end_user_id} ({self.scope}) compiled {self.compiled_at:%Y-%m-%d %H:%M}"
