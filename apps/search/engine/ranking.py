"""The candidate SQL of one memory type: `SELECT id, score, visible_rows` of its best visible items by
the method asked for (bm25, embedding, hybrid, fuzzy; the most recent without a query)."""

import functools

from apps.providers.embeddings import embed_query, embedding_model_name
from apps.search.engine.bm25 import bm25_sql, keyword_ctes
from apps.search.engine.corpus import corpus_stats, owned, scans, visible_cte
from apps.search.engine.fusion import RRF_K, RRF_KEYWORD_WEIGHT, RRF_SEMANTIC_WEIGHT
from apps.search.engine.hits import QueryVector
from apps.search.engine.scoping import filters_sql
from apps.search.registry import METHODS, SearchSource
from apps.tenancy.readers import Reader

# pgvector's iterative scans (so filtered queries still return `limit` rows), ef_search and
# the pg_trgm similarity threshold are connection settings: see DATABASES OPTIONS in settings.


def nearest_sql(
    source: SearchSource, where: str, where_params: list, vector: QueryVector, limit: int, scan: bool
) -> tuple[str, list]:
    """The nearest items by cosine distance among vectors of the query's model: a scan computes every
    visible distance (`+ 0` keeps the planner off the HNSW index, which answers otherwise)."""
    table, column = source.table, source.embedding_column
    order = f"(t.{column} <=> %s::vector) + 0" if scan else f"t.{column} <=> %s::vector"
    # A scan also counts what it read (the window runs before the LIMIT).
    visible_rows = "count(*) OVER ()" if scan else "NULL::bigint"
    sql = f"""
        SELECT t.id, 1 - (t.{column} <=> %s::vector) AS score, {visible_rows} AS visible_rows FROM {table} t
        WHERE {where} AND t.{column} IS NOT NULL AND t.embedding_model = %s ORDER BY {order} LIMIT %s
    """
    return sql, [vector.literal, *where_params, vector.model, vector.literal, limit]


def embedding_sql(source, where, where_params, vector: QueryVector, limit: int, scan: bool) -> tuple[str, list]:
    # An approximate scan over-fetches and the exact distances re-rank: with relaxed ordering
    # the first rows a filtered HNSW scan finds are not always the nearest.
    nearest, params = nearest_sql(source, where, where_params, vector, limit if scan else max(limit * 3, 50), scan)
    sql = f"SELECT id, score, visible_rows FROM ({nearest}) nearest ORDER BY score DESC, id LIMIT %s"
    return sql, [*params, limit]


def hybrid_sql(source, where, where_params, query, vector, limit, scan: bool, *, database: str) -> tuple[str, list]:
    """Reciprocal-rank fusion of the keyword and embedding candidates, in one round trip."""
    candidates = max(limit * 3, 50)
    stats = None if scan else corpus_stats(source, where, where_params, database=database)
    keyword_sql, keyword_params = keyword_ctes(source, where, where_params, query, candidates, stats, database=database)
    if scan:
        visible_sql, visible_params = visible_cte(source, where, where_params, vector)
        semantic_sql = (
            "SELECT id, 1 - distance AS score FROM visible WHERE distance IS NOT NULL ORDER BY distance, id LIMIT %s"
        )
        ctes = [visible_sql, keyword_sql, f"semantic AS ({semantic_sql})"]
        params = [*visible_params, *keyword_params, candidates]
    else:
        semantic_sql, semantic_params = nearest_sql(source, where, where_params, vector, candidates, scan=False)
        ctes = [keyword_sql, f"semantic AS ({semantic_sql})"]
        params = [*keyword_params, *semantic_params]
    sql = f"""
        WITH {", ".join(ctes)},
        ranked AS (
            SELECT id, {RRF_KEYWORD_WEIGHT} AS weight, row_number() OVER (ORDER BY score DESC, id) AS rank
            FROM keyword
            UNION ALL
            SELECT id, {RRF_SEMANTIC_WEIGHT} AS weight, row_number() OVER (ORDER BY score DESC, id) AS rank
            FROM semantic
        )
        SELECT id, sum(weight / ({RRF_K} + rank)) AS score, {"(SELECT count(*) FROM visible)" if scan else "NULL::bigint"} AS visible_rows
        FROM ranked GROUP BY id ORDER BY score DESC, id LIMIT %s
    """
    return sql, [*params, limit]


def fuzzy_sql(source: SearchSource, where: str, where_params: list, query: str, limit: int) -> tuple[str, list]:
    table, expression = source.table, source.fuzzy_expression
    sql = f"""
        SELECT t.id, word_similarity(%s, {expression}) AS score, NULL::bigint AS visible_rows FROM {table} t
        WHERE {where} AND %s <%% {expression}
        ORDER BY score DESC, t.id LIMIT %s
    """
    return sql, [query, *where_params, query, limit]


def recent_sql(source: SearchSource, where: str, where_params: list, limit: int) -> tuple[str, list]:
    sql = f"""
        SELECT t.id, 0.0 AS score, NULL::bigint AS visible_rows FROM {source.table} t WHERE {where}
        ORDER BY t.{source.time_column} DESC, t.id LIMIT %s
    """
    return sql, [*where_params, limit]


def query_vector(query: str) -> QueryVector:
    return _embedded_query(query, embedding_model_name())


@functools.lru_cache(maxsize=256)
def _embedded_query(query: str, model: str) -> QueryVector:
    """A query's vector, kept: each memory type of a search, a boosted search and the reranker ask again."""
    vector = embed_query(query)
    return QueryVector(literal="[" + ",".join(f"{value:.7g}" for value in vector) + "]", model=model)


def ranking_sql(
    source: SearchSource, *, reader: Reader, query: str, method: str, limit: int, filters: dict
) -> tuple[str, list]:
    """`SELECT id, score` of the best items of one memory type, within the reader's organisation and read scopes."""
    if method not in METHODS:
        raise ValueError(f"Unknown search method {method!r}")
    where, where_params = filters_sql(source, reader=reader, filters=filters)
    query = (query or "").strip()
    if not query:
        return recent_sql(source, where, where_params, limit)
    if method == "fuzzy":
        return fuzzy_sql(source, where, where_params, query, limit)
    scan = scans(source, where, where_params, owned(source, filters), database=reader.database)
    if method == "bm25":
        return bm25_sql(source, where, where_params, query, limit, scan, database=reader.database)
    if method == "embedding":
        return embedding_sql(source, where, where_params, query_vector(query), limit, scan)
    return hybrid_sql(source, where, where_params, query, query_vector(query), limit, scan, database=reader.database)
