from rest_framework import serializers

from apps.conversations.models import SESSION_ID_PATTERN, Session, SessionTag
from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.pagination import MAX_OFFSET, PageQuerySerializer
from apps.tenancy.models import SCOPE_PATTERN


class MemoryAddInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    session_id = fields.RegexField(
        SESSION_ID_PATTERN, error_messages={"invalid": "Use 1-64 letters, digits, '_' or '-'."}
    )
    session_tag = fields.ChoiceField(choices=SessionTag.choices, required=False)
    messages = serializers.ListField(child=serializers.JSONField(), allow_empty=False)
    occurred_at = fields.DateTimeField(required=False)
    filter_tags = fields.JSONObjectField(required=False)
    seal = fields.StrictBooleanField(default=False)
    outcome = fields.ChoiceField(choices=Session.Outcome.choices, required=False)

    def validate_messages(self, messages):
        from django.conf import settings

        if len(messages) > settings.MAX_MESSAGES_PER_ADD:
            raise serializers.ValidationError(
                f"At most {settings.MAX_MESSAGES_PER_ADD} messages per request; got {len(messages)}."
            )
        return messages


class MemoryAddOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    user_id = serializers.CharField()
    session_tag = serializers.CharField()
    status = serializers.CharField()
    messages_stored = serializers.IntegerField()
    messages_truncated = serializers.IntegerField()
    first_seq = serializers.IntegerField(allow_null=True)
    last_seq = serializers.IntegerField(allow_null=True)
    task_ids = serializers.ListField(child=serializers.UUIDField())


class SessionListFilterSerializer(PageQuerySerializer):
    user_id = fields.CharField(max_length=255, required=False)
    session_tag = fields.ChoiceField(choices=SessionTag.choices, required=False)
    status = fields.ChoiceField(choices=Session.Status.choices, required=False)
    start = fields.DateTimeField(required=False)
    end = fields.DateTimeField(required=False)


class OwnerQuerySerializer(InputSerializer):
    from_query = True

    user_id = fields.CharField(max_length=255)
    scope = fields.RegexField(SCOPE_PATTERN, required=False)
    limit = fields.IntegerField(required=False, min_value=1, max_value=1000, default=200)
    offset = fields.IntegerField(required=False, min_value=0, max_value=MAX_OFFSET, default=0)


class SessionPatchInputSerializer(InputSerializer):
    outcome = fields.ChoiceField(choices=Session.Outcome.choices)


class SessionOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    user_id = serializers.CharField(source="end_user.user_id")
    session_tag = serializers.CharField()
    status = serializers.CharField()
    outcome = serializers.CharField()
    scope = serializers.CharField()
    filter_tags = serializers.JSONField()
    message_count = serializers.IntegerField()
    last_message_at = serializers.DateTimeField(allow_null=True)
    sealed_at = serializers.DateTimeField(allow_null=True)
    distilled_at = serializers.DateTimeField(allow_null=True)
    extracted_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class MessageOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    name = serializers.CharField()
    content = serializers.CharField()
    tool_calls = serializers.JSONField(allow_null=True)
    tool_call_id = serializers.CharField()
    metadata = serializers.JSONField()
    truncated = serializers.BooleanField()
    occurred_at = serializers.DateTimeField()


class SessionSealOutputSerializer(serializers.Serializer):
    session = SessionOutputSerializer()
    task_ids = serializers.ListField(child=serializers.UUIDField())
