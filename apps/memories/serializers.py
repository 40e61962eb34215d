"""The memory endpoints' shapes, validated the same for REST and MCP; each memory type's output is defined once,
for its endpoints, its search hits and MCP."""

from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.fields import MemoryTypeField
from apps.core.pagination import PageQuerySerializer
from apps.memories.models import (
    ACTOR_MAX_LENGTH,
    DETAILS_MAX_LENGTH,
    EVENT_TYPE_MAX_LENGTH,
    NAME_MAX_LENGTH,
    SUMMARY_MAX_LENGTH,
    TimeGranularity,
)

REASON_MAX_LENGTH = 1000


class MemoryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    user_id = serializers.CharField(source="end_user.user_id")
    scope = serializers.CharField()
    summary = serializers.CharField()
    details = serializers.CharField()
    source_message_ids = serializers.ListField(
        child=serializers.UUIDField(), help_text="The turns it was learned from."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    deleted_at = serializers.DateTimeField(
        allow_null=True, help_text="Set when extraction retired it (hidden from search)."
    )


class SemanticMemoryOutputSerializer(MemoryOutputSerializer):
    memory_type = MemoryTypeField("semantic")
    name = serializers.CharField()
    source = serializers.CharField()


class EpisodicMemoryOutputSerializer(MemoryOutputSerializer):
    memory_type = MemoryTypeField("episodic")
    occurred_at = serializers.DateTimeField()
    time_granularity = serializers.CharField()
    actor = serializers.CharField()
    event_type = serializers.CharField()


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
    key = _text(
        255,
        required=False,
        help_text="Your own key for the memory, unique per user and scope: storing under a key already stored "
        "in the client's write scope replaces that memory (an upsert, recorded in its history; concurrent "
        "stores of one key leave one memory).",
    )
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
