"""The context endpoint's operation (REST: apps.context.views; MCP: apps.mcp_server)."""

from django.conf import settings
from django.utils import timezone

from apps.context.assembly import context_build
from apps.context.serializers import ContextInputSerializer, ContextOutputSerializer
from apps.conversations.models import SessionTag
from apps.conversations.selectors import session_get
from apps.conversations.turns import normalise_messages
from apps.core.operations import Access, operation, validated
from apps.core.replicas import read_on_replica


def _latest_text(raw_messages: list) -> str:
    turns = normalise_messages(raw_messages, max_chars=settings.MESSAGE_MAX_CHARS, default_occurred_at=timezone.now())
    return next((turn.content for turn in reversed(turns) if turn.content.strip()), "")


@operation(access=Access.READ)
def get_context(*, client, data: dict, from_query: bool = False) -> dict:
    """Prompt-ready context for a user within a token budget.

    Who the user is (their profile page, trimmed), the facts, dated events and earlier turns that bear on
    the latest messages (or `query`), and for a task session its top skills: a `text` block and the same
    items as JSON, each with its id and type. The budget (`max_tokens`) is never exceeded."""
    params = validated(ContextInputSerializer, data, from_query=from_query)
    session = None
    if params.get("session_id"):
        session = session_get(
            client=client, user_id=params["user_id"], session_id=params["session_id"], scope=params.get("scope")
        )
    query = params["query"] if "query" in params else _latest_text(params.get("messages") or [])

    def built(reader) -> tuple:
        context = context_build(
            reader=reader,
            user_id=params["user_id"],
            query=query,
            max_tokens=params["max_tokens"],
            memory_types=params.get("memory_types"),
            task_session=session is not None and session.session_tag == SessionTag.TASK,
        )
        items = [  # on the same copy as the context: an item's session may be read here
            {
                "ref": ref,
                "section": item.section,
                "memory_type": item.memory_type,
                "id": item.instance.pk,
                "text": item.body,
                "tokens": item.tokens,
                "score": item.score,
                "occurred_at": getattr(item.instance, "occurred_at", None)
                if item.memory_type in ("message", "episodic")
                else None,
                "session_id": item.instance.session.session_id if item.memory_type == "message" else None,
                "seq": item.instance.seq if item.memory_type == "message" else None,
            }
            for ref, item in enumerate(context.items, start=1)
        ]
        return context, items

    context, items = read_on_replica(client, built)
    return ContextOutputSerializer(
        {
            "user_id": params["user_id"],
            "session_id": session.session_id if session else None,
            "query": query,
            "max_tokens": params["max_tokens"],
            "tokens": context.tokens,
            "text": context.text,
            "items": items,
            "time_window": context.time_window,
        }
    ).data
