"""Domain events, announced by the app where they happen to whichever app listens (webhooks), inside the
transaction that makes them true: what a listener stores (a delivery, its task) commits or rolls back with it."""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

SKILL_EVOLVED = "skill.evolved"
SKILL_REVIEW_NEEDED = "skill.review_needed"
SESSION_LEARNED = "session.learned"
ERASURE_FINISHED = "erasure.finished"
EXPORT_READY = "export.ready"

EVENT_TYPES = (SKILL_EVOLVED, SKILL_REVIEW_NEEDED, SESSION_LEARNED, ERASURE_FINISHED, EXPORT_READY)


@dataclass(frozen=True)
class Event:
    """`data` holds ids and small facts only; `content` what was written or learned, sent only on opt-in."""

    type: str
    organization_id: uuid.UUID
    data: dict
    content: dict = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"evt_{uuid.uuid4().hex}")
    occurred_at: datetime = field(default_factory=timezone.now)


LISTENERS: list[Callable[[Event], None]] = []


def register_event_listener(listener: Callable[[Event], None]) -> None:
    """Called from an app's ready(): `listener(event)` runs in the emitter's transaction."""
    if listener not in LISTENERS:
        LISTENERS.append(listener)


def emit_event(event_type: str, *, organization_id, data: dict, content: dict | None = None) -> Event:
    if event_type not in EVENT_TYPES:
        raise ValueError(f"Unknown event type {event_type!r}")
    event = Event(type=event_type, organization_id=organization_id, data=data, content=content or {})
    for listener in LISTENERS:
        listener(event)
    return event
