"""A search, planned: the candidates of each memory type in one round trip, the question's
sub-queries and time window fused in, the reranker's order, then the kept hits read in full."""

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from apps.core.temporal import query_window
from apps.search.decompose import decompose
from apps.search.engine.corpus import note_large_owner
from apps.search.engine.fusion import capped, fused
from apps.search.engine.hits import Hit, Hits, TimeWindow
from apps.search.engine.rows import completed, instances, result_sets, search_sql
from apps.search.engine.scoping import filters_sql
from apps.search.registry import SOURCES, SearchSource
from apps.search.rerank import rerank
from apps.tenancy.readers import Reader


def search_source(source: SearchSource, *, reader: Reader, query: str, method: str, limit: int, filters: dict) -> list:
    """Returns [(instance, score)] of one memory type, best first, within the reader's organisation and read scopes."""
    hits = _merged(
        reader=reader, query=query, memory_types=[source.memory_type], method=method, limit=limit, filters=filters
    )
    return [(hit.instance, hit.score) for hit in hits]


def _merged(
    *,
    reader: Reader,
    query: str,
    memory_types: list[str] | None,
    method: str | None,
    limit: int,
    filters: dict,
    type_limits: dict | None = None,
    candidate_rows: bool = False,
) -> list[Hit]:
    """The best `limit` items of each memory type (or `type_limits[type]`, when lower) for one query,
    merged: best first with a query, newest first without; `candidate_rows`: see `row_layout`."""
    sources = [SOURCES[memory_type] for memory_type in memory_types or list(SOURCES)]
    statements = [
        search_sql(
            source,
            reader=reader,
            query=query,
            method=method or source.default_method,
            limit=min(limit, (type_limits or {}).get(source.memory_type, limit)),
            filters=filters,
            candidate_rows=candidate_rows,
        )
        for source in sources
    ]
    hits = []
    for source, rows in zip(sources, result_sets(statements, database=reader.database)):
        if rows and rows[0][1] is not None and rows[0][1] > settings.SEARCH_SCAN_MAX_ROWS:
            note_large_owner(source, *filters_sql(source, reader=reader, filters=filters))  # too large to scan
        found = instances(source, rows, candidate_rows, database=reader.database)
        hits += [Hit(source=source, instance=instance, score=score) for instance, score in found]
    if not (query or "").strip():
        return sorted(hits, key=lambda hit: getattr(hit.instance, hit.source.time_column), reverse=True)
    return capped(sorted(hits, key=lambda hit: hit.score, reverse=True))


def search(
    *,
    reader: Reader,
    query: str,
    memory_types: list[str] | None,
    method: str | None,
    limit: int,
    filters: dict,
    reranker: str | None = None,
    decomposer: str | None = None,
    time_window: str | None = None,
    now: datetime | None = None,
    type_limits: dict | None = None,
) -> Hits:
    """Searches several memory types and merges them, best first, up to `limit` results (at most
    `type_limits[type]` of a type). A time the query names ("last May", against `now`) filters or
    boosts by `time_window`; a `decomposer`'s sub-queries are searched and fused; a `reranker`
    reorders the best max(limit, RERANK_CANDIDATES) before the cut. Defaults from settings."""
    reranker = settings.RERANKER if reranker is None else reranker
    decomposer = settings.QUERY_DECOMPOSER if decomposer is None else decomposer
    ranked = bool((query or "").strip())
    reranking = ranked and reranker != "none"
    candidates = max(limit, settings.RERANK_CANDIDATES) if reranking else limit
    window = _time_window(query, mode=settings.SEARCH_TIME_WINDOW if time_window is None else time_window, now=now)
    if window is not None and window.mode == "filter":
        filters = {**filters, "window": window}
    arguments = dict(
        reader=reader,
        memory_types=memory_types,
        method=method,
        filters=filters,
        type_limits=type_limits,
        candidate_rows=reranking,  # rows in full only for the hits the reranker keeps
    )
    hits = _merged(query=query, limit=candidates, **arguments)
    subqueries = decompose(query, reader=reader) if ranked and decomposer == "llm" else None
    if subqueries:
        hits = fused([hits, *(_merged(query=subquery, limit=candidates, **arguments) for subquery in subqueries)])
    if window is not None and window.mode == "boost":
        within = _merged(query=query, limit=candidates, **{**arguments, "filters": {**filters, "window": window}})
        hits = fused([hits, within])
    if not reranking:
        return Hits(hits[:limit], decomposed_into=subqueries, time_window=window)
    reranked, reranked_by = rerank(query, hits[:candidates], reranker=reranker, reader=reader)
    kept = completed(reranked[:limit], reader=reader, user_id=filters.get("user_id"))
    return Hits(kept, reranked_by=reranked_by, decomposed_into=subqueries, time_window=window)


def _time_window(query: str, *, mode: str, now: datetime | None) -> TimeWindow | None:
    if mode == "off" or not (query or "").strip():
        return None
    if (resolved := query_window(query, timezone.localtime(now or timezone.now()))) is None:
        return None
    return TimeWindow(expression=resolved.expression, start=resolved.start, end=resolved.end, mode=mode)
