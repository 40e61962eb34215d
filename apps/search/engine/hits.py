"""What a search returns: hits, the query's vector and the time window the question named."""

from dataclasses import dataclass
from datetime import date

from apps.search.registry import SearchSource


@dataclass
class Hit:
    source: SearchSource
    instance: object
    score: float


@dataclass(frozen=True)
class QueryVector:
    """The query's vector (a pgvector literal) and the model that made it: only items embedded by
    the same model are ranked by distance, so a change of model (see `reembed`) never compares
    vectors of two models; until an item is re-embedded, keywords alone find it."""

    literal: str
    model: str


TIME_WINDOW_MODES = ("filter", "boost", "off")


@dataclass(frozen=True)
class TimeWindow:
    """The days a question asks about, the words that said so, and what the search did with them:
    `filter` (only items of those days, or naming them; timeless types unfiltered) or `boost` (those
    items fused in as a second ranking, so they rise)."""

    expression: str
    start: date
    end: date
    mode: str

    def as_dict(self) -> dict:
        return {
            "expression": self.expression,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "mode": self.mode,
        }


class Hits(list):
    """The hits of a search, best first, the reranker that ordered them (None: the fused order),
    the sub-queries searched beside the question (None: the question alone) and the time window
    the question named (None: none, or windows are off)."""

    def __init__(
        self,
        hits=(),
        *,
        reranked_by: str | None = None,
        decomposed_into: list[str] | None = None,
        time_window: TimeWindow | None = None,
    ):
        super().__init__(hits)
        self.reranked_by = reranked_by
        self.decomposed_into = decomposed_into
        self.time_window = time_window
