"""Query decomposition (QUERY_DECOMPOSER=llm): a question needing several facts ("what books has Tim
read?") becomes up to QUERY_DECOMPOSE_MAX searches; a model that fails leaves the plain search."""

import logging
from typing import Annotated

from django.conf import settings
from pydantic import BaseModel

from apps.core.validation import text_problem
from apps.providers.llm import kept

logger = logging.getLogger(__name__)

DECOMPOSERS = ("none", "llm")
SUBQUERY_MAX_CHARS = 200
INSTRUCTIONS = (
    "You plan searches over a person's memory (their past conversations). Split the question into "
    "the standalone search queries whose results together answer it: one per fact, person, time or "
    "item it needs, each short and self-contained (names instead of pronouns). A question about a "
    'single fact needs one query. Answer with a JSON object {{"queries": [strings]}} of at most {limit} queries.'
)


class QueriesAnswer(BaseModel):
    """What the decomposer answers."""

    queries: Annotated[list[str], kept(str)]


def decompose(query: str, *, reader) -> list[str] | None:
    """The sub-queries of `query` (without the query itself, at most QUERY_DECOMPOSE_MAX), or
    None when the model failed or gave nothing usable."""
    from apps.providers.llm import LLMError, chat_json, llm_enabled, parse_answer
    from apps.providers.tokens import fit_text, room_for

    if not llm_enabled():
        return None
    instructions = INSTRUCTIONS.format(limit=settings.QUERY_DECOMPOSE_MAX)
    try:
        data = chat_json(
            messages=[
                {"role": "system", "content": instructions},
                {"role": "user", "content": f"Question: {fit_text(query, room_for(instructions, 'Question: '))}"},
            ],
            answer=QueriesAnswer,
            organization=reader.organization(),
            purpose="decompose",
            timeout=settings.QUERY_DECOMPOSE_TIMEOUT_SECONDS,
            max_retries=0,
        )
        queries = parse_answer(QueriesAnswer, data).queries
    except LLMError as exc:
        logger.warning("Query decomposition failed (%s); the question is searched as it is.", type(exc).__name__)
        return None
    cleaned = []
    for item in queries:
        # Only short plain strings that differ from the question and each other become searches:
        # the model may split the question, not inject anything else into the engine.
        text = " ".join(item.replace("\x00", " ").split())[:SUBQUERY_MAX_CHARS]
        seen = {query.strip().casefold(), *(q.casefold() for q in cleaned)}
        if text and not text_problem(text) and text.casefold() not in seen:  # text_problem: a lone surrogate
            cleaned.append(text)
    return cleaned[: settings.QUERY_DECOMPOSE_MAX] or None
