"""The shapes of POST memory/context: what the operation takes (validated the same for REST and MCP) and
what it answers (the OpenAPI schema documents every field)."""

from django.conf import settings
from rest_framework import serializers

from apps.context.assembly import CONTEXT_TYPES, SECTIONS
from apps.conversations.models import SESSION_ID_PATTERN
from apps.conversations.serializers import MessageField
from apps.core import fields
from apps.core.api import InputSerializer
from apps.search.serializers import CommaSeparatedListField, TimeWindowSerializer
from apps.tenancy.models import SCOPE_PATTERN

DEFAULT_MAX_TOKENS = 1500
MIN_MAX_TOKENS = 64


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
