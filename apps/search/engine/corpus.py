"""What the engine knows about the corpus a caller sees: whether it is small enough to read whole
(the scan plan), its size and average length (BM25 through the indexes), the table's most common
lexemes, each kept a few minutes per filter set."""

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
    """A figure about the visible corpus, kept for CORPUS_STATS_SECONDS per filter set: such figures
    move slowly, and counting them on every query would cost more than the query."""
    key = cache_key(kind, source, where, where_params)
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CORPUS_STATS_SECONDS)
    return value


def owned(source: SearchSource, filters: dict) -> bool:
    """One user's (or one session's) own items."""
    per_user = filters.get("user_id") is not None and source.user_column
    return bool(per_user or (filters.get("session_id") and source.session_column))


def scans(
    source: SearchSource, where: str, where_params: list, owned: bool, *, database: str = DEFAULT_DB_ALIAS
) -> bool:
    """Whether the caller sees few enough items (SEARCH_SCAN_MAX_ROWS) to read them all once.

    One user's items are a few hundred or thousand rows: reading them through the
    owner's index and scoring them exactly costs far less than walking the
    GIN posting lists and the HNSW graph of the whole table, so the latency follows the size of
    what the caller sees, not the size of the table. Exact ranking also keeps a small tenant
    from losing its rows in a large shared HNSW graph, where a filtered approximate scan can
    miss them altogether.

    Owned items are scanned without counting them first: the scan reports how many it read
    (`visible_rows`), and `note_large_owner` remembers an owner with more than the limit, whose
    next searches use the indexes. A scope is counted (up to the limit) and the count cached.
    """
    cap = settings.SEARCH_SCAN_MAX_ROWS
    if owned:
        return not cache.get(cache_key(f"large:{cap}", source, where, where_params))

    def count():
        with connections[database].cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {source.table} t WHERE {where} LIMIT %s) visible",
                [*where_params, cap + 1],
            )
            return cursor.fetchone()[0]

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
        with connections[database].cursor() as cursor:
            cursor.execute(
                f"SELECT count(*), coalesce(avg(length(t.{vector})), 1) FROM {source.table} t WHERE {where}",
                where_params,
            )
            count, average = cursor.fetchone()
        return float(count), max(float(average), 1.0)

    return cached("corpus", source, where, where_params, compute)


def lexeme_shares(source: SearchSource, *, database: str = DEFAULT_DB_ALIAS) -> tuple[list[str], list[float]]:
    """The most common lexemes of the table's items and the share of items holding each, from the
    planner's statistics (ANALYZE samples each tsvector column's most common elements)."""
    table, column = source.table, source.search_vector_column

    def compute():
        with connections[database].cursor() as cursor:
            cursor.execute(
                "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
                " WHERE schemaname = current_schema() AND tablename = %s AND attname = %s",
                [table, column],
            )
            row = cursor.fetchone()
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
