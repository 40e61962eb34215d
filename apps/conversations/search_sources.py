"""How the search engine sees messages."""

from apps.conversations.models import Message
from apps.conversations.selectors import message_visible
from apps.conversations.serializers import MessageOutputSerializer
from apps.search.registry import SearchSource

MESSAGE_SOURCE = SearchSource(
    memory_type="message",
    model=Message,
    output=MessageOutputSerializer,
    item_fields=(
        "role",
        "name",
        "content",
        "seq",
        "tool_calls",
        "metadata",
        "session_id",
        "session_tag",
        "user_id",
        "scope",
        "occurred_at",
    ),
    visible=message_visible,
    text=lambda message: message.content,
    default_method="hybrid",
    time_column="occurred_at",
    event_time_column="occurred_at",
    date_span_column="date_span",
    session_column="session_id",
    fuzzy_fields=("content",),
    select_related=("session", "end_user"),
    candidate_fields=("session", "seq", "role", "name", "content", "occurred_at"),
    embedding_text=Message.embedding_text,
)
