"""The rerank stage: the best RERANK_CANDIDATES fused hits reordered by RERANKER (none, context,
cross-encoder or llm); a reranker that fails leaves the fused order."""

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated

from django.conf import settings
from pydantic import BaseModel

from apps.core.temporal import MONTHS
from apps.providers.llm import kept

logger = logging.getLogger(__name__)

RERANKERS = ("none", "context", "cross-encoder", "llm")


@dataclass(frozen=True)
class Candidate:
    """What a reranker sees of one fused hit."""

    text: str
    score: float
    # The session the item belongs to and its turn number there (None when the type has none).
    session: object | None = None
    position: int | None = None
    occurred_at: datetime | None = None
    # Who said it (a turn's speaker name), when the type records one.
    speaker: str = ""


def candidate_of(hit) -> Candidate:
    source, instance = hit.source, hit.instance
    session = getattr(instance, source.session_column) if source.session_column else None
    text = source.embedding_text(instance) if source.embedding_text else str(instance)
    return Candidate(
        text=text,
        score=hit.score,
        session=session,
        position=getattr(instance, "seq", None) if session is not None else None,
        occurred_at=getattr(instance, source.time_column, None),
        speaker=getattr(instance, "name", "") if session is not None and hasattr(instance, "role") else "",
    )


# Context reranker: an answering turn rarely stands alone, so each candidate's fused score (best = 1)
# gains its neighbouring turns' best, its session's total, a bonus when the question names its
# speaker and one when it names the session's month or year. Weights tuned on LOCOMO dev (bench/).
CONTEXT_NEIGHBOUR_WEIGHT = 0.3
CONTEXT_NEIGHBOUR_DISTANCE = 2
CONTEXT_SESSION_WEIGHT = 0.2
CONTEXT_SPEAKER_WEIGHT = 0.15
CONTEXT_DATE_WEIGHT = 0.3

_MONTHS = {name: number for number, month in enumerate(MONTHS, 1) for name in (month, month[:3])} | {"sept": 9}
_WORD = re.compile(r"[a-z]+|\d{4}")
_NAME_WORD = re.compile(r"\w{3,}")


def _query_dates(query: str) -> tuple[set[int], set[int]]:
    """Months and years the question names."""
    months, years = set(), set()
    for word in _WORD.findall(query.lower()):
        if word.isdigit() and 1900 <= int(word) <= 2100:
            years.add(int(word))
        elif word in _MONTHS and (word != "may" or re.search(r"\bmay\s+(\d{4}|of)\b|\bin may\b", query.lower())):
            months.add(_MONTHS[word])
    return months, years


def _date_match(candidate: Candidate, months: set[int], years: set[int]) -> float:
    when = candidate.occurred_at
    if when is None or not (months or years):
        return 0.0
    return float((not months or when.month in months) and (not years or when.year in years))


def _names_speaker(query_words: set[str], candidate: Candidate) -> float:
    return 1.0 if any(word in query_words for word in _NAME_WORD.findall(candidate.speaker.lower())) else 0.0


def context_scores(query: str, candidates: list[Candidate]) -> list[float]:
    if not candidates:
        return []
    top = max(candidate.score for candidate in candidates) or 1.0
    scaled = [candidate.score / top for candidate in candidates]
    # Each session as a small number, so the lookups below hash ints, not the sessions' UUIDs.
    numbers: dict = {}
    sessions = [None if c.session is None else numbers.setdefault(c.session, len(numbers)) for c in candidates]
    by_turn = {}
    session_total: dict = defaultdict(float)
    for candidate, session, score in zip(candidates, sessions, scaled):
        if session is not None:
            session_total[session] += score
            if candidate.position is not None:
                by_turn[(session, candidate.position)] = score
    best_session = max(session_total.values(), default=0.0) or 1.0
    months, years = _query_dates(query)
    query_words = set(_NAME_WORD.findall(query.lower()))
    scores = []
    for candidate, number, score in zip(candidates, sessions, scaled):
        neighbour = session = 0.0
        if number is not None:
            session = (session_total[number] - score) / best_session
            if candidate.position is not None:
                neighbour = max(
                    (
                        by_turn.get((number, candidate.position + offset), 0.0)
                        for offset in range(-CONTEXT_NEIGHBOUR_DISTANCE, CONTEXT_NEIGHBOUR_DISTANCE + 1)
                        if offset
                    ),
                    default=0.0,
                )
        scores.append(
            score
            + CONTEXT_NEIGHBOUR_WEIGHT * neighbour
            + CONTEXT_SESSION_WEIGHT * session
            + CONTEXT_SPEAKER_WEIGHT * _names_speaker(query_words, candidate)
            + CONTEXT_DATE_WEIGHT * _date_match(candidate, months, years)
        )
    return scores


# LLM reranker ----------------------------------------------------------------------------------

LLM_ITEM_CHARS = 400
LLM_INSTRUCTIONS = (
    "You rerank items retrieved from a person's memory for a question. Each item is numbered. "
    'Answer with a JSON object {"ranking": [item numbers]}: the items that help answer the question, '
    "the most useful first. Leave out items that do not help."
)


class RankingAnswer(BaseModel):
    """What the LLM reranker answers."""

    ranking: Annotated[list[int], kept(int)]


def llm_scores(query: str, candidates: list[Candidate], *, reader) -> list[float]:
    """Scores from the model's ranking: 1/(1 + position) for a ranked item, 0 for one it left out."""
    from apps.providers.llm import chat_json, parse_answer
    from apps.providers.tokens import fit_text, room_for

    question = f"Question: {fit_text(query, room_for(LLM_INSTRUCTIONS) // 4)}\n\nItems:\n"
    share = room_for(LLM_INSTRUCTIONS, question) // max(1, len(candidates)) - 1  # each item's share
    dates = [f"{candidate.occurred_at:%d %B %Y}: " if candidate.occurred_at else "" for candidate in candidates]
    items = "\n".join(
        fit_text(f"[{number}] {date}{candidate.text[:LLM_ITEM_CHARS]}", share)
        for number, (candidate, date) in enumerate(zip(candidates, dates), start=1)
    )
    data = chat_json(
        messages=[{"role": "system", "content": LLM_INSTRUCTIONS}, {"role": "user", "content": question + items}],
        answer=RankingAnswer,
        organization=reader.organization(),
        purpose="rerank",
        timeout=settings.RERANK_LLM_TIMEOUT_SECONDS,
        max_retries=0,
    )
    ranking = parse_answer(RankingAnswer, data).ranking
    # Numbers out of range or repeated are ignored: the model may only reorder.
    ranked = [number for number in dict.fromkeys(ranking) if 1 <= number <= len(candidates)]
    scores = [0.0] * len(candidates)
    for position, number in enumerate(ranked):
        scores[number - 1] = 1.0 / (1 + position)
    return scores


# The stage -------------------------------------------------------------------------------------


class RerankError(Exception):
    """A reranker could not score the candidates; the search keeps the fused order."""


def _scores(reranker: str, query: str, candidates: list[Candidate], *, reader) -> list[float]:
    if reranker == "context":
        return context_scores(query, candidates)
    if reranker == "llm":
        return llm_scores(query, candidates, reader=reader)
    if reranker == "cross-encoder":
        from apps.search.cross_encoder import cross_encoder_scores

        try:
            return cross_encoder_scores(query, candidates)
        except (ImportError, OSError, RuntimeError, ValueError) as exc:  # a missing file, an unreadable model
            raise RerankError(f"{type(exc).__name__}") from exc
    raise ValueError(f"Unknown RERANKER {reranker!r}; use any of {', '.join(RERANKERS)}.")


def rerank(query: str, hits: list, *, reranker: str, reader) -> tuple[list, str | None]:
    """The hits reordered by `reranker` (their score becomes its score) and its name; on a
    failure of the reranker, the hits as they were and None."""
    from apps.providers.llm import LLMError

    if not hits:
        return hits, reranker
    try:
        scores = _scores(reranker, query, [candidate_of(hit) for hit in hits], reader=reader)
    except (LLMError, RerankError) as exc:
        logger.warning("Reranker %s failed (%s); the fused order is kept.", reranker, type(exc).__name__)
        return hits, None
    order = sorted(range(len(hits)), key=lambda index: (-scores[index], index))
    return [replace(hits[index], score=scores[index]) for index in order], reranker
