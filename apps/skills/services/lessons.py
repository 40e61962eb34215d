"""A lesson is what a distiller returns; validation turns a model's JSON into lessons or refuses it."""

import re
from dataclasses import dataclass, field
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, FiniteFloat, StringConstraints

from apps.providers.llm import parse_items
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


def clamp_unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class LessonEvidence(BaseModel):
    quote: str = ""
    seqs: list[int] = []
    signal_type: Literal[tuple(SignalType.values)] = SignalType.INFERRED


class LessonAnswer(BaseModel):
    experience_type: Literal[tuple(ExperienceType.values)]
    title: NonEmpty
    content: NonEmpty
    importance: FiniteFloat
    credibility: FiniteFloat
    evidence: LessonEvidence | None = None


class LessonsAnswer(BaseModel):
    """What a distiller answers."""

    lessons: list[LessonAnswer]


def validate_lessons(data: dict, *, messages) -> tuple[list[Lesson], list[str]]:
    """(lessons, why any were refused). A quote not in the transcript cannot carry an explicit signal:
    it is kept as `inferred` with low credibility, so the model cannot invent a user's critique."""
    items = data.get("lessons")
    if not isinstance(items, list):
        return [], ['The answer has no "lessons" list.']
    parsed, refused = parse_items(LessonAnswer, items[:MAX_LESSONS_PER_SESSION])
    problems = [f"lesson {index}: {problem}" for index, problem in refused]
    if len(items) > MAX_LESSONS_PER_SESSION:
        problems.append(f"lessons after the first {MAX_LESSONS_PER_SESSION} were ignored")
    by_seq = {message.seq: message for message in messages}
    lessons: list[Lesson] = []
    for index, item in parsed:
        evidence = item.evidence or LessonEvidence()
        signal_type = evidence.signal_type
        quote = evidence.quote.strip()[: settings.EVIDENCE_MAX_CHARS]
        sources = [by_seq[seq] for seq in evidence.seqs if seq in by_seq]
        needle = _normalise(quote)
        if needle and not sources:
            sources = [message for message in messages if needle in _normalise(message.content or "")][:3]
        if signal_type != SignalType.INFERRED and (not needle or not sources):
            problems.append(f"lesson {index}: its {signal_type} quote is not in the transcript; kept as inferred")
            signal_type = SignalType.INFERRED
        credibility = clamp_unit(item.credibility)
        if signal_type == SignalType.INFERRED:
            credibility = min(credibility, INFERRED_MAX_CREDIBILITY)
        lessons.append(
            Lesson(
                experience_type=item.experience_type,
                title=item.title[:TITLE_MAX_LENGTH],
                content=item.content[:CONTENT_MAX_CHARS],
                importance=clamp_unit(item.importance),
                credibility=credibility,
                evidence={"quote": quote, "signal_type": signal_type},
                source_message_ids=[message.pk for message in sources],
            )
        )
    return lessons, problems
