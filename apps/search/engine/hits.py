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
    """The query's vector (a pgvector literal) and its model: only items embedded by the same model are
    ranked by distance (until `reembed` reaches an item, keywords alone find it)."""

    literal: str
    model: str


TIME_WINDOW_MODES = ("filter", "boost", "off")


@dataclass(frozen=True)
class TimeWindow:
    """The days a question asks about, the words that said so, and the mode: `filter` (only items of or
    naming those days; timeless types unfiltered) or `boost` (those fused in as a second ranking)."""

    expression: str
    start: date
    end: date
    mode: str

    def as_dict(self) -> dict:
        return {**vars(self), "start": self.start.isoformat(), "end": self.end.isoformat()}


class Hits(list):
    """The hits of a search, best first, with the reranker that ordered them, the sub-queries searched
    beside the question and the time window it named (each None when there was none)."""

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


@dataclass(frozen=True)
class SearchAnswer:
    """What a search answers: the question asked and its hits (apps.search.serializers renders it)."""

    query: str | None
    hits: Hits

    @property
    def count(self) -> int:
        return len(self.hits)
