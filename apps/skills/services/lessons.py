"""A lesson is what a distiller returns; validation turns a model's JSON into lessons or refuses it."""

import math
import re
from dataclasses import dataclass, field

from django.conf import settings

from apps.skills.models import TITLE_MAX_LENGTH, ExperienceType, SignalType

CONTENT_MAX_CHARS = 4000
MAX_LESSONS_PER_SESSION = 10
# Credibility is high only for explicit signals; a lesson the model merely inferred stays low.
INFERRED_MAX_CREDIBILITY = 0.5
_SPACE = re.compile(r"\s+")


@dataclass
class Lesson:
    experience_type: str
    title: str
    content: str
    importance: float
    credibility: float
    evidence: dict
    source_message_ids: list = field(default_factory=list)
    action_signature: list = field(default_factory=list)


def clamp_unit(value) -> float | None:
    """A number in [0, 1], or None when the value is not a finite number."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    return min(1.0, max(0.0, number))


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def validate_lessons(data: dict, *, messages) -> tuple[list[Lesson], list[str]]:
    """Lessons from a distiller's JSON ({"lessons": [...]}) and the reasons any were refused.

    Numbers are clamped, unknown enums refuse the lesson, texts are capped. A quote that
    does not occur in the transcript cannot carry an explicit signal: the lesson is kept
    as `inferred` with low credibility, so the model cannot invent a user's critique.
    """
    problems: list[str] = []
    items = data.get("lessons")
    if not isinstance(items, list):
        return [], ['The answer has no "lessons" list.']
    by_seq = {message.seq: message for message in messages}
    lessons: list[Lesson] = []
    for index, item in enumerate(items):
        if len(lessons) >= MAX_LESSONS_PER_SESSION:
            problems.append(f"lessons after the first {MAX_LESSONS_PER_SESSION} were ignored")
            break
        if not isinstance(item, dict):
            problems.append(f"lesson {index}: not an object")
            continue
        experience_type = item.get("experience_type")
        if experience_type not in ExperienceType.values:
            problems.append(f"lesson {index}: unknown experience_type {experience_type!r}")
            continue
        title, content = item.get("title"), item.get("content")
        if not isinstance(title, str) or not title.strip() or not isinstance(content, str) or not content.strip():
            problems.append(f"lesson {index}: title and content must be non-empty strings")
            continue
        importance, credibility = clamp_unit(item.get("importance")), clamp_unit(item.get("credibility"))
        if importance is None or credibility is None:
            problems.append(f"lesson {index}: importance and credibility must be numbers")
            continue
        evidence = item.get("evidence") if isinstance(item.get("evidence"), dict) else {}
        signal_type = evidence.get("signal_type", SignalType.INFERRED)
        if signal_type not in SignalType.values:
            problems.append(f"lesson {index}: unknown signal_type {signal_type!r}")
            continue
        quote = evidence.get("quote") if isinstance(evidence.get("quote"), str) else ""
        quote = quote.strip()[: settings.EVIDENCE_MAX_CHARS]

        seqs = evidence.get("seqs", item.get("seqs", []))
        seqs = seqs if isinstance(seqs, list) else []
        sources = [by_seq[seq] for seq in seqs if isinstance(seq, int) and not isinstance(seq, bool) and seq in by_seq]
        needle = _normalise(quote)
        if needle and not sources:
            sources = [message for message in messages if needle in _normalise(message.content or "")][:3]
        if signal_type != SignalType.INFERRED and (not needle or not sources):
            problems.append(f"lesson {index}: its {signal_type} quote is not in the transcript; kept as inferred")
            signal_type = SignalType.INFERRED
        if signal_type == SignalType.INFERRED:
            credibility = min(credibility, INFERRED_MAX_CREDIBILITY)

        lessons.append(
            Lesson(
                experience_type=experience_type,
                title=title.strip()[:TITLE_MAX_LENGTH],
                content=content.strip()[:CONTENT_MAX_CHARS],
                importance=importance,
                credibility=credibility,
                evidence={"quote": quote, "signal_type": signal_type},
                source_message_ids=[message.pk for message in sources],
            )
        )
    return lessons, problems
