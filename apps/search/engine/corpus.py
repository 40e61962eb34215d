"""What the engine knows of the corpus a caller sees (small enough to scan? its size and average
length, the table's common lexemes), each kept a few minutes per filter set."""

import hashlib

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections

from apps.search.engine.hits import QueryVector
from apps.search.registry import SearchSource

CORPUS_STATS_SECONDS = 300


def cache_key(kind: str, source: SearchSource, where: str, where_params: list) -> str:
    return f"search:{kind}:" + hashlib.sha256(f"{source.table}|{where}|{where_params!r}".encode()).hexdigest()


def cached(kind: str, source: SearchSource, where: str, where_params: list, compute):
    """A slow-moving figure about the visible corpus (counting it per query would cost more than the query)."""
    return cache.get_or_set(cache_key(kind, source, where, where_params), compute, CORPUS_STATS_SECONDS)


def _fetchone(database: str, sql: str, params: list) -> tuple | None:
    with connections[database].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def owned(source: SearchSource, filters: dict) -> bool:
    """One user's (or one session's) own items."""
    per_user = filters.get("user_id") is not None and source.user_column
    return bool(per_user or (filters.get("session_id") and source.session_column))


def scans(
    source: SearchSource, where: str, where_params: list, owned: bool, *, database: str = DEFAULT_DB_ALIAS
) -> bool:
    """Whether the caller sees few enough items (SEARCH_SCAN_MAX_ROWS) to read them all: latency then
    follows what the caller sees, not the table, and a small tenant's rows cannot be lost in a large
    shared HNSW graph. Owned items are scanned uncounted (`note_large_owner` learns from the scan); a
    scope is counted up to the limit, cached."""
    cap = settings.SEARCH_SCAN_MAX_ROWS
    if owned:
        return not cache.get(cache_key(f"large:{cap}", source, where, where_params))

    def count():
        sql = f"SELECT count(*) FROM (SELECT 1 FROM {source.table} t WHERE {where} LIMIT %s) visible"
        return _fetchone(database, sql, [*where_params, cap + 1])[0]

    return cached(f"rows:{cap}", source, where, where_params, count) <= cap


def note_large_owner(source: SearchSource, where: str, where_params: list) -> None:
    """An owner whose scan read more items than SEARCH_SCAN_MAX_ROWS: their next searches use the indexes."""
    cache.set(
        cache_key(f"large:{settings.SEARCH_SCAN_MAX_ROWS}", source, where, where_params), True, CORPUS_STATS_SECONDS
    )


def corpus_stats(
    source: SearchSource, where: str, where_params: list, *, database: str = DEFAULT_DB_ALIAS
) -> tuple[float, float]:
    """Number of documents and average document length of a large visible corpus (cached)."""
    vector = source.search_vector_column

    def compute():
        sql = f"SELECT count(*), coalesce(avg(length(t.{vector})), 1) FROM {source.table} t WHERE {where}"
        count, average = _fetchone(database, sql, where_params)
        return float(count), max(float(average), 1.0)

    return cached("corpus", source, where, where_params, compute)


def lexeme_shares(source: SearchSource, *, database: str = DEFAULT_DB_ALIAS) -> tuple[list[str], list[float]]:
    """The most common lexemes of the table's items and the share of items holding each, from the
    planner's statistics (ANALYZE samples each tsvector column's most common elements)."""
    table, column = source.table, source.search_vector_column

    def compute():
        row = _fetchone(
            database,
            "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
            " WHERE schemaname = current_schema() AND tablename = %s AND attname = %s",
            [table, column],
        )
        if row is None or row[0] is None:
            return [], []
        elements, frequencies = row
        return list(elements), [float(share) for share in frequencies[: len(elements)]]

    return cached("shares", source, "", [], compute)


def visible_cte(source: SearchSource, where: str, where_params: list, vector: QueryVector | None) -> tuple[str, list]:
    """`visible(id, doc, distance)`: every item the caller sees, read once for both rankings (the
    distance only for vectors of the query's model)."""
    distance = (
        f"CASE WHEN t.embedding_model = %s THEN t.{source.embedding_column} <=> %s::vector END"
        if vector
        else "NULL::float8"
    )
    sql = (
        f"visible AS MATERIALIZED (SELECT t.id, t.{source.search_vector_column} AS doc, {distance} AS distance"
        f" FROM {source.table} t WHERE {where})"
    )
    return sql, ([vector.model, vector.literal] if vector else []) + list(where_params)
