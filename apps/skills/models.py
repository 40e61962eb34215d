"""Skill memory: experiences distilled from task sessions, the skills evolved from them, and
every skill's version history with its lineage."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from apps.core.models import BaseModel, search_indexes

SKILL_NAME_MAX_LENGTH = 100
TITLE_MAX_LENGTH = 120


class ExperienceType(models.TextChoices):
    WORTH_LEARNING = "worth_learning", "Worth learning"
    WORTH_AVOIDING = "worth_avoiding", "Worth avoiding"


class SignalType(models.TextChoices):
    USER_CRITIQUE = "user_critique", "User critique"
    USER_CONFIRMATION = "user_confirmation", "User confirmation"
    TOOL_ERROR = "tool_error", "Tool error"
    SELF_CORRECTION = "self_correction", "Self-correction"
    INFERRED = "inferred", "Inferred"


class SkillExperience(BaseModel):
    """One lesson from one session: "when X, do Y, because…" or "Z went wrong; to avoid it…"."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        CONSUMED = "consumed", "Consumed"
        SUPERSEDED = "superseded", "Superseded"
        # Would change what other end users are served, but too few users taught it (apps.skills.trust).
        HELD = "held", "Held until corroborated"
        # Its text looks like instructions aimed at the model or like a secret: a person decides.
        FLAGGED = "flagged", "Flagged for review"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="skill_experiences")
    # Retention may prune a session's turns; the lesson learned from it stays.
    session = models.ForeignKey(
        "conversations.Session", on_delete=models.SET_NULL, null=True, blank=True, related_name="skill_experiences"
    )
    source_message_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    experience_type = models.CharField(max_length=16, choices=ExperienceType.choices)
    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    content = models.TextField()
    importance = models.FloatField(default=0.5)
    credibility = models.FloatField(default=0.5)
    evidence = models.JSONField(default=dict, blank=True, help_text='{"quote": ..., "signal_type": ...}')
    # Ordered tool names the lesson is about (a workflow's tool-call sequence, or the failing tool).
    action_signature = ArrayField(models.CharField(max_length=128), default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Pattern names, never the text; a person's approval stands in for corroboration by other users.
    flags = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    approved_by = models.CharField(max_length=255, blank=True, default="")
    created_by = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="+")
    search_vector = models.GeneratedField(
        expression=SearchVector("title", "content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(experience_type__in=["worth_learning", "worth_avoiding"]),
                name="skill_experience_type_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "consumed", "superseded", "held", "flagged"]),
                name="skill_experience_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(importance__gte=0, importance__lte=1, credibility__gte=0, credibility__lte=1),
                name="skill_experience_scores_in_unit_range",
                violation_error_message="Importance and credibility lie between 0 and 1.",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "scope", "status", "-created_at"], name="skill_exp_scope_status_idx"),
            # The fuzzy method's trigram index is on its expression (apps/skills/search.py): see migrations.
            *search_indexes("skill_exp"),
        ]

    def __str__(self):
        return self.title

    def embedding_text(self) -> str:
        """What the experience's vector encodes, at distillation and at re-embedding alike."""
        return f"{self.title}\n{self.content}"


class Skill(BaseModel):
    """A named, versioned, reusable procedure, shared across its scope unless it has an end user."""

    class EntryType(models.TextChoices):
        WORKFLOW = "workflow", "Workflow"
        GUIDE = "guide", "Guide"
        SCRIPT = "script", "Script"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        PENDING_REVIEW = "pending_review", "Pending review"
        ARCHIVED = "archived", "Archived"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    end_user = models.ForeignKey(
        "tenancy.EndUser",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="skills",
        help_text="Set: that user's own skill, served to no other user.",
    )
    name = models.SlugField(max_length=SKILL_NAME_MAX_LENGTH)
    description = models.TextField()
    instructions = models.TextField()
    triggers = models.JSONField(default=list, blank=True)
    examples = models.JSONField(default=list, blank=True)
    entry_type = models.CharField(max_length=16, choices=EntryType.choices, default=EntryType.GUIDE)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    version = models.PositiveIntegerField(default=1)
    action_signature = ArrayField(models.CharField(max_length=128), default=list, blank=True)
    # Trust between end users (apps.skills.trust): a skill is served to the end users who taught
    # it (`supporters`, EndUser ids) until SKILL_SHARE_MIN_USERS of them did or a person approved it.
    shared = models.BooleanField(default=False)
    supporters = ArrayField(models.UUIDField(), default=list, blank=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("name", "description", "triggers", "instructions", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        ordering = ["scope", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "name"],
                condition=~Q(status="archived"),
                name="skill_name_unique_per_scope_among_live",
                violation_error_message="A live skill with this name already exists in the scope.",
            ),
            models.CheckConstraint(
                condition=Q(entry_type__in=["workflow", "guide", "script"]), name="skill_entry_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "pending_review", "archived"]), name="skill_status_valid"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="skill_version_positive"),
        ]
        indexes = [
            models.Index(fields=["organization", "scope", "status"], name="skill_scope_status_idx"),
            # The admin changelist's order: a page is read from the index instead of sorting every skill.
            models.Index(fields=["organization", "scope", "name"], name="skill_admin_order_idx"),
            # The review queue's order (status descending: pending_review first, then newest).
            models.Index(fields=["organization", "status", "updated_at"], name="skill_review_order_idx"),
            # The fuzzy method's trigram index is on its expression (apps/skills/search.py): see migrations.
            *search_indexes("skill"),
        ]

    def __str__(self):
        return f"{self.name} v{self.version}"

    def embedding_text(self) -> str:
        """What the skill's vector encodes, at every write and at re-embedding alike."""
        return f"{self.description}\n{self.instructions}"


class SkillVersion(BaseModel):
    """One change of a skill: the full snapshot after it, who made it, why, and from which experiences."""

    class Operation(models.TextChoices):
        CREATE = "create", "Create"
        EDIT = "edit", "Edit"
        MERGE = "merge", "Merge"
        ARCHIVE = "archive", "Archive"
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        SHARE = "share", "Share"

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    operation = models.CharField(max_length=16, choices=Operation.choices)
    snapshot = models.JSONField()
    actor = models.CharField(
        max_length=255, help_text='e.g. "evolution:rules", "evolution:llm:gpt-4o-mini", "admin:alice".'
    )
    reason = models.TextField(blank=True, default="")
    experiences = models.ManyToManyField(SkillExperience, blank=True, related_name="skill_versions")

    class Meta:
        ordering = ["skill", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "version"], name="skill_version_unique_per_skill"),
            models.CheckConstraint(
                condition=Q(operation__in=["create", "edit", "merge", "archive", "approve", "reject", "share"]),
                name="skill_version_operation_valid",
            ),
        ]

    def __str__(self):
        return f"{self.skill.name} v{self.version} ({self.operation})"


class SkillUse(BaseModel):
    """One skill served by one retrieval, append-only. It names its session by id, not a foreign key: the
    session rarely exists yet when the agent retrieves, and a later outcome counts without a rewrite."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64, help_text="The skill's scope.")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="uses")
    version = models.PositiveIntegerField()
    rank = models.PositiveSmallIntegerField()
    score = models.FloatField()
    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey(
        "tenancy.EndUser", on_delete=models.CASCADE, null=True, blank=True, related_name="skill_uses"
    )
    # The session (its id within the end user and the client's write scope), when the agent named one.
    session_scope = models.CharField(max_length=64, blank=True, default="")
    session_id = models.CharField(max_length=64, blank=True, default="")
    applied_at = models.DateTimeField(null=True, blank=True, help_text="When the agent reported it followed the skill.")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["skill", "created_at"], name="skill_use_skill_time_idx"),
            models.Index(
                fields=["organization", "end_user", "session_scope", "session_id"], name="skill_use_session_idx"
            ),
            models.Index(fields=["client"], name="skill_use_client_idx"),
        ]

    def __str__(self):
        return f"{self.skill_id} v{self.version} in {self.session_id or 'no session'}"


class SkillFeedback(BaseModel):
    """An agent's or a person's verdict on a skill for one task session, with the actor."""

    class Verdict(models.TextChoices):
        HELPED = "helped", "Helped"
        HURT = "hurt", "Hurt"
        IRRELEVANT = "irrelevant", "Irrelevant"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64, help_text="The skill's scope.")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="feedback")
    version = models.PositiveIntegerField()
    end_user = models.ForeignKey(
        "tenancy.EndUser", on_delete=models.CASCADE, null=True, blank=True, related_name="skill_feedback"
    )
    session_id = models.CharField(max_length=64, blank=True, default="")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    reason = models.TextField(blank=True, default="")
    # The client that sent it (an agent), or none for a person in the admin, named by `actor`.
    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    actor = models.CharField(max_length=255, help_text='e.g. "client:support-bot", "admin:alice".')

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["helped", "hurt", "irrelevant"]), name="skill_feedback_verdict_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["skill", "created_at"], name="skill_feedback_skill_time_idx"),
            models.Index(fields=["client"], name="skill_feedback_client_idx"),
        ]

    def __str__(self):
        return f"{self.verdict} on {self.skill_id}"


class SkillWithheld(BaseModel):
    """A skill not yet shared that ranked first for an end user who was not served it: one row per
    skill and asking user (one party, one voice), so the review queue shows how many it would answer."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64, help_text="The skill's scope.")
    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="withheld")
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="skills_withheld")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "end_user"], name="skill_withheld_unique_per_user"),
        ]

    def __str__(self):
        return f"{self.skill_id} withheld from {self.end_user_id}"
