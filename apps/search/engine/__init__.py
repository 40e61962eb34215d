"""The one search engine: bm25, embedding, hybrid and fuzzy over every registered memory type, each
query built from a SearchSource so organisation and read scopes are inside the SQL of every method."""

from apps.search.engine.fusion import rrf_scores
from apps.search.engine.hits import TIME_WINDOW_MODES, Hit, Hits, QueryVector, SearchAnswer, TimeWindow
from apps.search.engine.planning import search, search_source
from apps.search.engine.rows import search_sql

__all__ = [
    "TIME_WINDOW_MODES",
    "Hit",
    "Hits",
    "QueryVector",
    "SearchAnswer",
    "TimeWindow",
    "rrf_scores",
    "search",
    "search_source",
    "search_sql",
]
