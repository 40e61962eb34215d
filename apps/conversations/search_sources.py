"""How the search engine sees messages."""

from apps.conversations.models import Message
from apps.search.registry import SearchSource


def message_item(message: Message) -> dict:
    return {
        "role": message.role,
        "name": message.name,
        "content": message.content,
        "seq": message.seq,
        "tool_calls": message.tool_calls,
        "metadata": message.metadata,
        "session_id": message.session.session_id,
        "session_tag": message.session.session_tag,
        "user_id": message.end_user.user_id,
        "scope": message.scope,
        "occurred_at": message.occurred_at,
    }


MESSAGE_SOURCE = SearchSource(
    memory_type="message",
    model=Message,
    to_item=message_item,
    default_method="hybrid",
    time_column="occurred_at",
    event_time_column="occurred_at",
    date_span_column="date_span",
    session_column="session_id",
    fuzzy_expression="t.content",
    select_related=("session", "end_user"),
    embedding_text=Message.embedding_text,
)
