from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from memory_platform_client.messages import ChatMessage
from rest_framework import serializers

from apps.conversations.models import SESSION_ID_PATTERN, Session, SessionTag
from apps.core import fields
from apps.core.api import InputSerializer, projection
from apps.core.pagination import MAX_OFFSET, PageQuerySerializer
from apps.core.schema import storable_object_schema, with_storage_rules
from apps.core.validation import InputError, check_json
from apps.tenancy.models import SCOPE_PATTERN


# The chat message (the SDK's ChatMessage, which normalise_messages validates with) as the API stores it.
@extend_schema_field(with_storage_rules(ChatMessage.model_json_schema()))
class MessageField(serializers.JSONField):
    """Any storable JSON here (the REST parser checked that already; an MCP tool's arguments are
    checked now, naming the field); its shape is checked by apps.conversations.turns.normalise_messages,
    which names the message and field."""

    def to_internal_value(self, data):
        try:
            check_json(data, depth=2)  # the body is level 1, `messages` level 2
        except InputError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]} if exc.field else [exc.message]) from None
        return data


class MemoryAddInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    session_id = fields.RegexField(
        SESSION_ID_PATTERN, error_messages={"invalid": "Use 1-64 letters, digits, '_' or '-'."}
    )
    session_tag = fields.ChoiceField(choices=SessionTag.choices, required=False)
    messages = serializers.ListField(child=MessageField(), allow_empty=False, max_length=settings.MAX_MESSAGES_PER_ADD)
    occurred_at = fields.DateTimeField(required=False)
    filter_tags = fields.TagsField(required=False)
    seal = fields.StrictBooleanField(default=False)
    outcome = fields.ChoiceField(choices=Session.Outcome.choices, required=False)

    def validate_messages(self, messages):
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
    outcome = fields.ChoiceField(choices=Session.Outcome.choices, required=False)
    session_tag = fields.ChoiceField(
        choices=SessionTag.choices,
        required=False,
        help_text="Re-tag the session; allowed until anything has been learned from it (409 after).",
    )


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
    """A stored turn, defined once: a session's transcript shows it without what the session says
    (TranscriptMessage), a search hit with it (apps.conversations.search_sources)."""

    id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    name = serializers.CharField()
    content = serializers.CharField()
    tool_calls = serializers.JSONField(help_text="The assistant's tool calls, or null.")
    tool_call_id = serializers.CharField()
    metadata = serializers.JSONField()
    truncated = serializers.BooleanField()
    occurred_at = serializers.DateTimeField()
    session_id = serializers.CharField(source="session.session_id")
    session_tag = serializers.CharField(source="session.session_tag")
    user_id = serializers.CharField(source="end_user.user_id")
    scope = serializers.CharField()


TranscriptMessageSerializer = projection(
    MessageOutputSerializer,
    ("id", "seq", "role", "name", "content", "tool_calls", "tool_call_id", "metadata", "truncated", "occurred_at"),
    name="TranscriptMessageSerializer",
)


class SessionDetailOutputSerializer(SessionOutputSerializer):
    messages = TranscriptMessageSerializer(
        source="messages_page", many=True, help_text="One page of the transcript, in order."
    )
    messages_next_offset = serializers.IntegerField(
        allow_null=True, help_text="The `offset` of the next page; null on the last."
    )
    indexed_through_seq = serializers.IntegerField(
        help_text="Every turn up to this `seq` is indexed and found by every search method; the session's "
        "last turn once indexing has caught up (turns are found by keywords from the moment they are added)."
    )


class SessionSealOutputSerializer(serializers.Serializer):
    session = SessionOutputSerializer()
    task_ids = serializers.ListField(child=serializers.UUIDField())


class SessionDeleteOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    user_id = serializers.CharField()
    scope = serializers.CharField()
    task_id = serializers.UUIDField(help_text="The background task deleting it: GET tasks/<id>/ for its status.")
    status = serializers.CharField(help_text="The task's status.")


# Base64 as LangGraph's serializer's bytes are sent (RFC 4648, padded).
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


class SerialisedValueSerializer(InputSerializer):
    """A value as LangGraph's serializer wrote it (`serde.dumps_typed`): its type tag and bytes, base64."""

    type = fields.CharField(max_length=64)
    data = fields.RegexField(
        BASE64_PATTERN, allow_blank=True, error_messages={"invalid": "Must be base64 (RFC 4648, padded)."}
    )


@extend_schema_field(storable_object_schema())
class MetadataField(serializers.JSONField):
    """A checkpoint's metadata: any storable JSON object."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        try:
            check_json(data, depth=2)  # the body is level 1, the metadata level 2
        except InputError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]} if exc.field else [exc.message]) from None
        return data


class CheckpointThreadSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    thread_id = fields.CharField(max_length=255)


class CheckpointPutInputSerializer(CheckpointThreadSerializer):
    checkpoint_ns = fields.CharField(max_length=255, required=False, allow_blank=True, default="")
    checkpoint_id = fields.CharField(max_length=64)
    parent_checkpoint_id = fields.CharField(max_length=64, required=False, allow_blank=True, default="")
    checkpoint = SerialisedValueSerializer()
    metadata = MetadataField(required=False, default=dict)
    message_ids = serializers.ListField(
        child=fields.CharField(max_length=255),
        required=False,
        default=list,
        max_length=10000,
        help_text="The ids of the thread's messages this checkpoint holds; the answer names those no earlier "
        "checkpoint of the thread held.",
    )


class CheckpointPutOutputSerializer(serializers.Serializer):
    new_message_ids = serializers.ListField(child=serializers.CharField())


class CheckpointWriteSerializer(InputSerializer):
    idx = fields.IntegerField(min_value=-(2**31), max_value=2**31 - 1)
    channel = fields.CharField(max_length=255)
    value = SerialisedValueSerializer()


class CheckpointWritesInputSerializer(CheckpointThreadSerializer):
    checkpoint_ns = fields.CharField(max_length=255, required=False, allow_blank=True, default="")
    checkpoint_id = fields.CharField(max_length=64)
    task_id = fields.CharField(max_length=255)
    task_path = fields.CharField(max_length=1024, required=False, allow_blank=True, default="")
    writes = serializers.ListField(child=CheckpointWriteSerializer(), allow_empty=False, max_length=1000)


class CheckpointListFilterSerializer(PageQuerySerializer):
    user_id = fields.CharField(max_length=255)
    thread_id = fields.CharField(max_length=255, required=False)
    checkpoint_ns = fields.CharField(max_length=255, required=False, allow_blank=True)
    checkpoint_id = fields.CharField(max_length=64, required=False)
    before = fields.CharField(max_length=64, required=False, help_text="Only checkpoints older than this id.")
    metadata = fields.TagsField(
        required=False, help_text='Only checkpoints whose metadata holds these keys and values: `{"step": 1}`.'
    )


class CheckpointOutputSerializer(serializers.Serializer):
    user_id = serializers.CharField(source="end_user.user_id")
    scope = serializers.CharField()
    thread_id = serializers.CharField()
    checkpoint_ns = serializers.CharField()
    checkpoint_id = serializers.CharField()
    parent_checkpoint_id = serializers.CharField()
    checkpoint = serializers.JSONField(help_text='{"type": ..., "data": base64}')
    metadata = serializers.JSONField()
    writes = serializers.JSONField(help_text="Pending writes: [{task_id, task_path, idx, channel, value}].")
    created_at = serializers.DateTimeField()


class CheckpointDeleteOutputSerializer(serializers.Serializer):
    deleted = serializers.IntegerField(help_text="Checkpoints deleted (0 when the thread had none).")


class CheckpointWritesOutputSerializer(serializers.Serializer):
    stored = serializers.IntegerField(
        help_text="Writes new or replaced (a regular write sent again is kept as it was)."
    )
