"""The output of the episodic and semantic memory types, defined once: their endpoints
(apps.agent), their search hits (apps.memories.search) and MCP render them with these."""

from rest_framework import serializers

from apps.core.fields import MemoryTypeField


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
