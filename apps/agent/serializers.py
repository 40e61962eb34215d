"""The shapes of the agent's API: what each operation takes (validated the same for REST and MCP)
and what it answers (the OpenAPI schema documents every field)."""

from django.conf import settings
from rest_framework import serializers

from apps.agent.context import CONTEXT_TYPES, SECTIONS
from apps.conversations.models import SESSION_ID_PATTERN
from apps.conversations.serializers import MessageField
from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.pagination import PageQuerySerializer
from apps.memories.models import (
    ACTOR_MAX_LENGTH,
    DETAILS_MAX_LENGTH,
    EVENT_TYPE_MAX_LENGTH,
    NAME_MAX_LENGTH,
    SUMMARY_MAX_LENGTH,
    TimeGranularity,
)
from apps.search.serializers import CommaSeparatedListField, TimeWindowSerializer
from apps.tenancy.models import SCOPE_PATTERN

DEFAULT_MAX_TOKENS = 1500
MIN_MAX_TOKENS = 64
REASON_MAX_LENGTH = 1000


# Context -----------------------------------------------------------------------------------------


class ContextInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255, help_text="The person the context is about.")
    session_id = fields.RegexField(
        SESSION_ID_PATTERN,
        required=False,
        error_messages={"invalid": "Use 1-64 letters, digits, '_' or '-'."},
        help_text="The session the agent is in: a task session also gets its top skills.",
    )
    scope = fields.RegexField(
        SCOPE_PATTERN,
        required=False,
        help_text="The session's scope, when its id exists in several (used with session_id only).",
    )
    messages = serializers.ListField(
        child=MessageField(),
        required=False,
        allow_empty=False,
        max_length=settings.MAX_MESSAGES_PER_ADD,
        help_text="The latest turns (OpenAI chat messages); the last one with text is what the context is for.",
    )
    query = fields.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="What the context is for, instead of the latest message (it wins when both are "
        "given). Empty: the most recent items.",
    )
    max_tokens = fields.IntegerField(
        required=False,
        default=DEFAULT_MAX_TOKENS,
        min_value=MIN_MAX_TOKENS,
        max_value=settings.CONTEXT_MAX_TOKENS,
        help_text="The budget of `text`, in estimated tokens (see docs/api.md); never exceeded.",
    )
    memory_types = CommaSeparatedListField(
        child=fields.ChoiceField(choices=CONTEXT_TYPES),
        required=False,
        allow_empty=False,
        help_text="Use only these types (default: all; procedural skills are shown for a task session).",
    )

    def validate_memory_types(self, memory_types):
        return list(dict.fromkeys(memory_types))


class ContextItemSerializer(serializers.Serializer):
    ref = serializers.IntegerField(help_text="The [n] that marks the item's line in `text`.")
    section = serializers.ChoiceField(choices=list(SECTIONS))
    memory_type = serializers.ChoiceField(choices=CONTEXT_TYPES)
    id = serializers.UUIDField()
    text = serializers.CharField(help_text="The item's line as `text` shows it (trimmed to its share of the budget).")
    tokens = serializers.IntegerField(help_text="Estimated tokens of the line.")
    score = serializers.FloatField(allow_null=True, help_text="Its search score; null for the user's own page.")
    occurred_at = serializers.DateTimeField(allow_null=True, help_text="When a turn or an event happened.")
    session_id = serializers.CharField(allow_null=True, help_text="A turn's session.")
    seq = serializers.IntegerField(allow_null=True, help_text="A turn's position in its session.")


class ContextOutputSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    session_id = serializers.CharField(allow_null=True)
    query = serializers.CharField(help_text="What the context was built for (the latest message's text, or `query`).")
    max_tokens = serializers.IntegerField()
    tokens = serializers.IntegerField(help_text="Estimated tokens of `text`; at most `max_tokens`.")
    text = serializers.CharField(help_text="The prompt-ready block: sections in a fixed order, each line marked [ref].")
    items = ContextItemSerializer(many=True)
    time_window = TimeWindowSerializer(
        allow_null=True,
        help_text="The days a time named in the query stands for (resolved against now) and what the search "
        "did with them (SEARCH_TIME_WINDOW); null: none.",
    )


# Memories ------------------------------------------------------------------------------------


class MemoryListFilterSerializer(PageQuerySerializer):
    user_id = fields.CharField(max_length=255)
    subject = fields.CharField(
        required=False, max_length=NAME_MAX_LENGTH, help_text="A fact's name or an event's actor (case-insensitive)."
    )
    start = fields.DateTimeField(
        required=False, help_text="From this time (events: when they happened; facts: last changed)."
    )
    end = fields.DateTimeField(required=False, help_text="Until this time.")
    q = fields.CharField(
        required=False, max_length=255, help_text="Text the summary, details (or a fact's name) contain."
    )


def _text(max_length: int, **kwargs):
    return fields.CharField(max_length=max_length, **kwargs)


class SemanticMemoryCreateInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    name = _text(NAME_MAX_LENGTH, help_text="The subject: a person, a thing, a preference.")
    summary = _text(SUMMARY_MAX_LENGTH)
    details = _text(DETAILS_MAX_LENGTH, required=False, allow_blank=True)
    source = _text(255, required=False, allow_blank=True, help_text='Where it was learned, e.g. "stated by the user".')
    reason = _text(REASON_MAX_LENGTH, required=False, allow_blank=True, help_text="Recorded in the history.")


class EpisodicMemoryCreateInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    summary = _text(SUMMARY_MAX_LENGTH)
    details = _text(DETAILS_MAX_LENGTH, required=False, allow_blank=True)
    occurred_at = fields.DateTimeField()
    time_granularity = fields.ChoiceField(choices=TimeGranularity.choices, required=False)
    actor = _text(ACTOR_MAX_LENGTH, required=False, allow_blank=True)
    event_type = _text(EVENT_TYPE_MAX_LENGTH, required=False, allow_blank=True)
    reason = _text(REASON_MAX_LENGTH, required=False, allow_blank=True, help_text="Recorded in the history.")


class SemanticMemoryPatchInputSerializer(InputSerializer):
    """The fields to change; none changes nothing (and records nothing)."""

    name = _text(NAME_MAX_LENGTH, required=False)
    summary = _text(SUMMARY_MAX_LENGTH, required=False)
    details = _text(DETAILS_MAX_LENGTH, required=False, allow_blank=True)
    reason = _text(REASON_MAX_LENGTH, required=False, allow_blank=True, help_text="Recorded in the history.")


class EpisodicMemoryPatchInputSerializer(InputSerializer):
    """The fields to change; none changes nothing (and records nothing)."""

    summary = _text(SUMMARY_MAX_LENGTH, required=False)
    details = _text(DETAILS_MAX_LENGTH, required=False, allow_blank=True)
    occurred_at = fields.DateTimeField(required=False)
    time_granularity = fields.ChoiceField(choices=TimeGranularity.choices, required=False)
    reason = _text(REASON_MAX_LENGTH, required=False, allow_blank=True, help_text="Recorded in the history.")


class MemoryChangeOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    operation = serializers.ChoiceField(choices=["add", "update", "delete"])
    actor = serializers.CharField(help_text='Who made it: "client:<id>", "extraction:…", "admin:…".')
    reason = serializers.CharField()
    previous_value = serializers.JSONField(allow_null=True, help_text="The memory's fields before the change.")
    new_value = serializers.JSONField(allow_null=True, help_text="Its fields after it (null for a delete).")
    task_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()


class MemoryHistoryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    memory_type = serializers.CharField()
    changes = MemoryChangeOutputSerializer(many=True, help_text="Every change, oldest first.")


# Deletes and findings ----------------------------------------------------------------------------


class SessionDeleteOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    user_id = serializers.CharField()
    scope = serializers.CharField()
    task_id = serializers.UUIDField(help_text="The background task deleting it: GET tasks/<id>/ for its status.")
    status = serializers.CharField(help_text="The task's status.")


class LintFindingOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["stale", "orphan", "contradiction"])
    severity = serializers.ChoiceField(choices=["info", "warning", "error"])
    status = serializers.ChoiceField(choices=["open", "resolved"])
    detail = serializers.CharField()
    peer_id = serializers.UUIDField(allow_null=True, help_text="The other page of a contradiction.")
    resolved_by = serializers.CharField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class ProfileFindingsOutputSerializer(serializers.Serializer):
    profile_id = serializers.UUIDField()
    findings = LintFindingOutputSerializer(many=True, help_text="Open findings first, newest first.")


# Consolidation -----------------------------------------------------------------------------------


class ConsolidateInputSerializer(InputSerializer):
    user_id = fields.CharField(
        max_length=255, required=False, help_text="The person whose memories to consolidate; absent: the whole scope."
    )
    dry_run = fields.StrictBooleanField(
        required=False, default=False, help_text="Only report what would be merged, retired and flagged."
    )


class ConsolidateOutputSerializer(serializers.Serializer):
    user_id = serializers.CharField(allow_null=True, help_text="null: every user of the scope.")
    scope = serializers.CharField(help_text="The client's write scope, where consolidation runs.")
    dry_run = serializers.BooleanField()
    task_id = serializers.UUIDField(help_text="The background task: GET tasks/<id>/ for its status and result.")
    status = serializers.CharField(help_text="The task's status.")
