"""The one search engine: bm25, embedding, hybrid and fuzzy over every registered memory type.

Every query is built here from a SearchSource, so organisation and read scopes are applied
inside the SQL of every method and type alike; there is no other path. The package, by concern:
`planning` (a search from question to hits: candidates, sub-queries, time window, rerank),
`scoping` (the WHERE clause every ranking shares), `corpus` (what is known of the visible corpus,
and whether to read it whole), `bm25` and `ranking` (the candidate SQL of each method), `fusion`
(reciprocal-rank fusion, per-type caps), `rows` (result rows into model instances), `hits`.
"""

from apps.search.engine.fusion import rrf_scores
from apps.search.engine.hits import TIME_WINDOW_MODES, Hit, Hits, QueryVector, TimeWindow
from apps.search.engine.planning import search, search_source
from apps.search.engine.rows import search_sql

__all__ = [
    "TIME_WINDOW_MODES",
    "Hit",
    "Hits",
    "QueryVector",
    "TimeWindow",
    "rrf_scores",
    "search",
    "search_source",
    "search_sql",
]
