"""The dates of turns: the relative dates their words name, resolved, and the date line of their context."""

from datetime import timedelta

from django.contrib.postgres.fields.ranges import DateRange
from django.db import transaction

from apps.conversations.models import Message
from apps.core.temporal import ResolvedDate, find_dates, resolve_dates, span_of

DATE_KEYS = ("resolved_date", "date_end", "date_granularity", "date_expression", "resolved_dates")


DATE_NOTE_MARK = "\u23f1"


def context_with_dates(context: str, metadata: dict) -> str:
    """The context plus one line naming the absolute dates the turn's relative ones refer to
    (`metadata["resolved_dates"]`, see messages_set_dates), so keyword search finds a turn that
    said "last month" when asked about "May 2023". Replaces an earlier such line."""
    lines = [line for line in context.splitlines() if not line.startswith(DATE_NOTE_MARK)]
    dates = [entry.get("text", "") for entry in (metadata or {}).get("resolved_dates") or [] if isinstance(entry, dict)]
    if any(dates):
        lines.append(f"{DATE_NOTE_MARK} " + "; ".join(text for text in dates if text))
    return "\n".join(lines)


# The turns whose words are dated: what a person or an assistant said (not tool output or prompts).
DATED_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


def date_metadata(dates: list[ResolvedDate]) -> dict:
    """A turn's DATE_KEYS for its relative dates: the first expression as the top-level keys
    (resolved_date, date_granularity, ...); all of them, with human words for each, under
    resolved_dates. {} for none."""
    if not dates:
        return {}
    return {
        **dates[0].as_metadata(),
        "resolved_dates": [{**resolved.as_metadata(), "text": resolved.describe()} for resolved in dates],
    }


def date_range(span) -> DateRange | None:
    """A (first day, last day) pair as stored in a `date_span` column (canonical: upper bound excluded)."""
    return None if span is None else DateRange(span[0], span[1] + timedelta(days=1), "[)")


def message_apply_dates(message: Message) -> bool:
    """Sets a turn's date metadata (its relative dates resolved against its own date) and its
    `date_span` (every date its words name) on the instance; True when either changed."""
    spoken = message.role in DATED_ROLES and message.content.strip()
    relative = resolve_dates(message.content, message.occurred_at) if spoken else []
    span = date_range(span_of(find_dates(message.content, message.occurred_at))) if spoken else None
    kept = {key: value for key, value in (message.metadata or {}).items() if key not in DATE_KEYS}
    metadata = {**kept, **date_metadata(relative)}
    if metadata == (message.metadata or {}) and span == message.date_span:
        return False
    message.metadata, message.date_span = metadata, span
    return True


DATED_FIELDS = ("id", "role", "content", "occurred_at", "metadata", "context", "date_span")


def messages_normalize_dates(*, message_ids: list) -> list:
    """Re-dates the turns from their words (message_apply_dates), under lock, writing only those
    that changed (with the date line of their context); returns the ids of those."""
    with transaction.atomic():
        messages = list(
            Message.objects.select_for_update().filter(pk__in=list(message_ids)).order_by("pk").only(*DATED_FIELDS)
        )
        changed = [message for message in messages if message_apply_dates(message)]
        for message in changed:
            message.context = context_with_dates(message.context, message.metadata)
        Message.objects.bulk_update(changed, ["metadata", "context", "date_span"])
    return [message.pk for message in changed]


def messages_set_dates(*, dates: dict) -> int:
    """Stores the absolute dates of each turn's relative ones: `dates` maps a message id to its DATE_KEYS,
    which replace the turn's earlier ones, and the turn's searchable context gets a line naming them.

    The turns are re-read under lock, so what the embedding handler wrote meanwhile is kept.
    """
    messages = list(
        Message.objects.select_for_update().filter(pk__in=list(dates)).order_by("pk").only("id", "metadata", "context")
    )
    for message in messages:
        kept = {key: value for key, value in (message.metadata or {}).items() if key not in DATE_KEYS}
        message.metadata = {**kept, **{key: value for key, value in dates[message.pk].items() if key in DATE_KEYS}}
        message.context = context_with_dates(message.context, message.metadata)
    Message.objects.bulk_update(messages, ["metadata", "context"])
    return len(messages)
