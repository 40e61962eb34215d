"""Sessions and their messages: the transcripts everything else is learned from."""

import json
from collections import deque

from django.conf import settings
from django.contrib.postgres.fields import DateRangeField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from apps.core.models import BaseModel, SessionTag, search_indexes

SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class Session(BaseModel):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        SEALED = "sealed", "Sealed"

    class Outcome(models.TextChoices):
        SUCCESS = "success", "Success"
        FAILURE = "failure", "Failure"
        UNKNOWN = "unknown", "Unknown"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="sessions")
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="sessions")
    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="sessions")
    scope = models.CharField(max_length=64)
    session_id = models.CharField(max_length=64)
    session_tag = models.CharField(max_length=16, choices=SessionTag.choices, default=SessionTag.CONVERSATION)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.UNKNOWN)
    filter_tags = models.JSONField(default=dict, blank=True)
    message_count = models.PositiveIntegerField(default=0)
    last_seq = models.PositiveIntegerField(default=0)
    last_message_at = models.DateTimeField(null=True, blank=True)
    sealed_at = models.DateTimeField(null=True, blank=True)
    distilled_at = models.DateTimeField(null=True, blank=True)
    extracted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_message_at"]
        constraints = [
            # Unique per user *within a scope*: a writer of one scope can neither see nor collide
            # with another scope's session ids (a collision would answer differently, an oracle).
            models.UniqueConstraint(
                fields=["organization", "end_user", "scope", "session_id"],
                name="session_id_unique_per_user_and_scope",
                violation_error_message="This user already has a session with this id in this scope.",
            ),
            models.CheckConstraint(condition=Q(session_tag__in=["task", "conversation"]), name="session_tag_valid"),
            models.CheckConstraint(condition=Q(status__in=["open", "sealed"]), name="session_status_valid"),
            models.CheckConstraint(
                condition=Q(outcome__in=["success", "failure", "unknown"]), name="session_outcome_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "scope", "-last_message_at"], name="session_org_scope_recent_idx"),
            models.Index(fields=["status", "last_message_at"], name="session_status_idle_idx"),
            models.Index(fields=["end_user", "session_tag", "status"], name="session_user_tag_status_idx"),
        ]

    def __str__(self):
        return f"{self.session_id} ({self.session_tag}, {self.status})"


class Message(BaseModel):
    """One turn. Organisation, scope and end user are copied from the session so every search
    filters on this table alone."""

    class Role(models.TextChoices):
        SYSTEM = "system", "System"
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"
        TOOL = "tool", "Tool"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    name = models.CharField(max_length=255, blank=True, default="")
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    truncated = models.BooleanField(default=False)
    occurred_at = models.DateTimeField()
    created_by = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="+")
    context = models.TextField(
        blank=True,
        default="",
        help_text="The neighbouring turns, filled in the background and indexed for keyword search.",
    )
    # The speaker and the turn weigh A; the neighbouring turns weigh B (half, in the BM25 scoring).
    search_vector = models.GeneratedField(
        expression=SearchVector("name", "content", config="english", weight="A")
        + SearchVector("context", config="english", weight="B"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=128, blank=True, default="")
    learned_at = models.DateTimeField(
        null=True, blank=True, help_text="When this turn was learned from (distilled or extracted)."
    )
    date_span = DateRangeField(
        null=True,
        blank=True,
        help_text="The days the turn's date expressions refer to, first to last (normalize_dates); null: none.",
    )

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique_per_session"),
            models.CheckConstraint(
                condition=Q(role__in=["system", "user", "assistant", "tool"]), name="message_role_valid"
            ),
        ]
        indexes = [
            # The user leads so the planner picks a bitmap heap scan, prefetching scattered pages (an
            # organisation leading looks ordered in a one-tenant table: 3× slower cold at 1M turns).
            models.Index(fields=["end_user", "organization", "scope", "-occurred_at"], name="message_user_recent_idx"),
            GinIndex(fields=["content"], opclasses=["gin_trgm_ops"], name="message_content_trgm_idx"),
            *search_indexes("message"),
        ]

    def __str__(self):
        return f"{self.session_id}#{self.seq} {self.role}"

    def embedding_text(self) -> str:
        """What the turn's vector encodes: the speaker's name matters to questions about people. A long
        turn is embedded by its head (a tool output's, with the keys of its JSON when cut there); the
        whole text stays in the transcript and the keyword index, which finds an id or a number anywhere."""
        if self.role == Message.Role.TOOL:
            return tool_output_head(self.content, max_chars=settings.EMBEDDING_TOOL_OUTPUT_CHARS)
        text = f"{self.name}: {self.content}" if self.name else self.content
        return text[: settings.EMBEDDING_TURN_MAX_CHARS]


# At most this many keys follow a cut JSON output (objects keyed by ids have as many keys as records).
TOOL_OUTPUT_KEYS = 40


def tool_output_head(text: str, *, max_chars: int) -> str:
    """A tool output's first `max_chars` characters; when that cuts a JSON output (after the `[tool] `
    its turn starts with), followed by the keys of its objects, first seen first, so that the vector
    still says what kind of record the output holds."""
    if len(text) <= max_chars:
        return text
    _, separator, body = text.partition("] ") if text.startswith("[") else ("", "", text)
    keys = _json_keys(body if separator else text)[:TOOL_OUTPUT_KEYS]
    return f"{text[:max_chars]} … keys: {', '.join(keys)}" if keys else text[:max_chars]


def _json_keys(text: str) -> list[str]:
    """The distinct keys of the objects in a JSON document, breadth first ([] if it is not JSON)."""
    try:
        waiting = deque([json.loads(text)])
    except ValueError:
        return []
    keys: dict[str, None] = {}
    while waiting:
        value = waiting.popleft()
        if isinstance(value, dict):
            keys.update(dict.fromkeys(value))
            waiting.extend(value.values())
        elif isinstance(value, list):
            waiting.extend(value)
    return list(keys)


class IngestRequest(BaseModel):
    """The first response to an `Idempotency-Key`, so a replay returns it and stores nothing."""

    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    response = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "key"], name="ingest_request_key_unique_per_client"),
        ]


class Checkpoint(BaseModel):
    """One LangGraph checkpoint of a thread: the graph's state at a step, kept as the SDK serialised it
    (opaque here), with its metadata (filtered on). The thread's messages are also copied into session
    turns by the SDK; `message_ids` are the ids this checkpoint holds, so each message is copied once
    however many checkpoints repeat it."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="checkpoints")
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="checkpoints")
    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="checkpoints")
    scope = models.CharField(max_length=64)
    thread_id = models.CharField(max_length=255)
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    parent_checkpoint_id = models.CharField(max_length=64, blank=True, default="")
    checkpoint = models.JSONField(help_text='The serialised checkpoint: {"type": ..., "data": base64}.')
    metadata = models.JSONField(default=dict, blank=True)
    message_ids = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["thread_id", "checkpoint_ns", "-checkpoint_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "end_user", "thread_id", "checkpoint_ns", "checkpoint_id"],
                name="checkpoint_unique_per_thread",
                violation_error_message="This checkpoint id already exists in the thread.",
            ),
        ]
        indexes = [GinIndex(fields=["message_ids"], name="checkpoint_message_ids_idx")]

    def __str__(self):
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.checkpoint_id}"


class CheckpointWrite(BaseModel):
    """A pending write of a task against a checkpoint. Not a foreign key: LangGraph may store a step's
    writes before the checkpoint they belong to (it saves checkpoints in the background)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey("tenancy.EndUser", on_delete=models.CASCADE, related_name="checkpoint_writes")
    client = models.ForeignKey("tenancy.Client", on_delete=models.CASCADE, related_name="checkpoint_writes")
    scope = models.CharField(max_length=64)
    thread_id = models.CharField(max_length=255)
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=255)
    task_path = models.CharField(max_length=1024, blank=True, default="")
    idx = models.IntegerField()
    channel = models.CharField(max_length=255)
    value = models.JSONField(help_text='The serialised value: {"type": ..., "data": base64}.')

    class Meta:
        ordering = ["task_id", "idx"]
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "organization",
                    "scope",
                    "end_user",
                    "thread_id",
                    "checkpoint_ns",
                    "checkpoint_id",
                    "task_id",
                    "idx",
                ],
                name="checkpoint_write_unique_per_task",
                violation_error_message="This task already wrote at this index.",
            ),
        ]

    def __str__(self):
        return f"{self.thread_id}/{self.checkpoint_ns}/{self.checkpoint_id} {self.task_id}[{self.idx}]"
