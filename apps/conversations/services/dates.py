"""The dates of turns: the relative dates their words name, resolved, and the date line of their context."""

from datetime import timedelta

from django.contrib.postgres.fields.ranges import DateRange
from django.db import transaction

from apps.conversations.models import Message
from apps.core.temporal import ResolvedDate, find_dates, resolve_dates, span_of

DATE_KEYS = ("resolved_date", "date_end", "date_granularity", "date_expression", "resolved_dates")
DATE_NOTE_MARK = "\u23f1"


def context_with_dates(context: str, metadata: dict) -> str:
    """The context with one line (replacing an earlier one) naming the absolute dates of the turn's
    relative ones, so keyword search finds "last month" when asked about "May 2023"."""
    lines = [line for line in context.splitlines() if not line.startswith(DATE_NOTE_MARK)]
    dates = [entry.get("text", "") for entry in (metadata or {}).get("resolved_dates") or [] if isinstance(entry, dict)]
    if any(dates):
        lines.append(f"{DATE_NOTE_MARK} " + "; ".join(text for text in dates if text))
    return "\n".join(lines)


# The turns whose words are dated: what a person or an assistant said (not tool output or prompts).
DATED_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


def date_metadata(dates: list[ResolvedDate]) -> dict:
    """A turn's DATE_KEYS: the first relative date as top-level keys, all of them (with words) under
    resolved_dates; {} for none."""
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
    """Sets a turn's date metadata and `date_span` from its words, on the instance; True if changed."""
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
    """Re-dates the turns from their words under lock; returns the ids of those that changed."""
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
    """Stores each turn's DATE_KEYS (`dates`: by message id), replacing earlier ones, and its date line;
    re-read under lock, so what the embedding handler wrote meanwhile is kept."""
    messages = list(
        Message.objects.select_for_update().filter(pk__in=list(dates)).order_by("pk").only("id", "metadata", "context")
    )
    for message in messages:
        kept = {key: value for key, value in (message.metadata or {}).items() if key not in DATE_KEYS}
        message.metadata = {**kept, **{key: value for key, value in dates[message.pk].items() if key in DATE_KEYS}}
        message.context = context_with_dates(message.context, message.metadata)
    Message.objects.bulk_update(messages, ["metadata", "context"])
    return len(messages)
