"""Domain events, announced by the app where they happen to whichever app listens (webhooks), inside the
transaction that makes them true: what a listener stores (a delivery, its task) commits or rolls back with it.
An event carries ids and small facts only; what it is about (a skill's text) is rendered from the current
rows by the app that owns them when a listener needs it, so no copy of it outlives an edit or an erasure."""

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
    """`data` holds ids and small facts only, never user content (event_content renders that)."""

    type: str
    organization_id: uuid.UUID
    data: dict
    id: str = field(default_factory=lambda: f"evt_{uuid.uuid4().hex}")
    occurred_at: datetime = field(default_factory=timezone.now)


LISTENERS: list[Callable[[Event], None]] = []


def register_event_listener(listener: Callable[[Event], None]) -> None:
    """Called from an app's ready(): `listener(event)` runs in the emitter's transaction."""
    if listener not in LISTENERS:
        LISTENERS.append(listener)


def emit_event(event_type: str, *, organization_id, data: dict) -> Event:
    if event_type not in EVENT_TYPES:
        raise ValueError(f"Unknown event type {event_type!r}")
    event = Event(type=event_type, organization_id=organization_id, data=data)
    for listener in LISTENERS:
        listener(event)
    return event


# Event type -> render(organization_id=, data=) returning what the event is about as it is now, None when
# that is gone (deleted, erased); registered by the app owning the rows.
CONTENT_RENDERERS: dict[str, Callable[..., dict | None]] = {}


def register_event_content(event_type: str, render: Callable[..., dict | None]) -> None:
    """Called from an app's ready(): how an event type's content is read from the current rows."""
    CONTENT_RENDERERS[event_type] = render


def event_content(event_type: str, *, organization_id, data: dict) -> dict | None:
    """What the event is about, read now; None for an event type without content or whose rows are gone."""
    render = CONTENT_RENDERERS.get(event_type)
    return None if render is None else render(organization_id=organization_id, data=data)
