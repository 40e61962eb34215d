"""The one search engine: bm25, embedding, hybrid and fuzzy over every registered memory type.

Every query is built here from a SearchSource, so organisation and read scopes are applied
inside the SQL of every method and type alike; there is no other path.
"""

import hashlib
import json
import math
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection

from apps.providers.embeddings import embed_texts
from apps.search.registry import METHODS, SOURCES, SearchSource

RRF_K = 60
CORPUS_STATS_SECONDS = 300
EXACT_MAX_ROWS = 20000
# Fusion weights: the keyword ranking (BM25 with neighbouring-turn context) is the stronger
# signal on conversational memory. Measured on LOCOMO (bench/locomo.py, all-MiniLM-L6-v2),
# hybrid recall@10 is 0.664 at 1:1, 0.703 at 2:1 and 0.727 at 3:1.
RRF_KEYWORD_WEIGHT = 3.0
RRF_SEMANTIC_WEIGHT = 1.0
BM25_K1 = 1.2
BM25_B = 0.75
# How much an occurrence in a lower-weighted part of a document counts; A and the
# unlabelled default D count 1.
WEIGHT_B = 0.5
WEIGHT_C = 0.25
# pgvector's iterative scans (so filtered queries still return `limit` rows), ef_search and
# the pg_trgm similarity threshold are connection settings: see DATABASES OPTIONS in settings.


@dataclass
class Hit:
    source: SearchSource
    instance: object
    score: float


def _filters_sql(source: SearchSource, *, client, filters: dict) -> tuple[str, list]:
    """The WHERE clause every method shares: tenant and read scopes first, then the caller's filters."""
    table_session = "conversations_session"
    clauses = ["t.organization_id = %s", "t.scope = ANY(%s)"]
    params: list = [client.organization_id, list(client.read_scopes)]
    if filters.get("user_id") is not None and source.user_column:
        user_match = (
            f"t.{source.user_column} = (SELECT id FROM tenancy_enduser WHERE organization_id = %s AND user_id = %s)"
        )
        if source.null_user_is_shared:
            user_match = f"({user_match} OR t.{source.user_column} IS NULL)"
        clauses.append(user_match)
        params += [client.organization_id, filters["user_id"]]
    session_conditions, session_params = [], []
    if filters.get("session_id"):
        session_conditions.append("s.session_id = %s")
        session_params.append(filters["session_id"])
    if filters.get("session_tag"):
        session_conditions.append("s.session_tag = %s")
        session_params.append(filters["session_tag"])
    tags = filters.get("filter_tags") or {}
    if tags:
        session_conditions.append("s.filter_tags @> %s::jsonb")
        session_params.append(json.dumps(tags))
    if session_conditions:
        if source.session_column is None:
            clauses.append("FALSE")  # the type has no session: nothing of it can match a session filter
        else:
            clauses.append(
                f"t.{source.session_column} IN (SELECT s.id FROM {table_session} s "
                f"WHERE s.organization_id = %s AND {' AND '.join(session_conditions)})"
            )
            params += [client.organization_id, *session_params]
    if filters.get("start"):
        clauses.append(f"t.{source.time_column} >= %s")
        params.append(filters["start"])
    if filters.get("end"):
        clauses.append(f"t.{source.time_column} <= %s")
        params.append(filters["end"])
    if source.extra_where:
        clauses.append(f"({source.extra_where})")
    return " AND ".join(clauses), params


def _table(source: SearchSource) -> str:
    return source.model._meta.db_table


def _or_query_sql() -> str:
    """Any query term may match (questions rarely contain every word of the answer)."""
    return "(SELECT replace(plainto_tsquery('english', %s)::text, ' & ', ' | ')::tsquery AS q)"


def _corpus_stats(source: SearchSource, where: str, where_params: list) -> tuple[float, float]:
    """Number of documents and average document length of the corpus the caller can see.

    Scanning every visible document costs more than the rest of a query on a large scope, and
    the figures move slowly, so they are cached for CORPUS_STATS_SECONDS per filter set.
    """
    table, vector = _table(source), source.search_vector_column
    key = "search:corpus:" + hashlib.sha256(f"{table}|{where}|{where_params!r}".encode()).hexdigest()
    stats = cache.get(key)
    if stats is None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*), coalesce(avg(length(t.{vector})), 1) FROM {table} t WHERE {where}", where_params
            )
            count, average = cursor.fetchone()
        stats = (float(count), max(float(average), 1.0))
        cache.set(key, stats, CORPUS_STATS_SECONDS)
    return stats


def _plan(source: SearchSource, where: str, where_params: list, filters: dict) -> tuple[bool, tuple | None]:
    """(rank embeddings exactly?, corpus statistics or None to count them inline).

    One user's or session's items are few: exact ranking, statistics counted inline. A scope
    uses the cached statistics, and stays exact while it holds at most EXACT_MAX_ROWS items:
    a small tenant in a large shared HNSW graph is a tiny share of it, and a filtered
    approximate scan can miss its rows altogether.
    """
    if _exact(source, filters):
        return True, None
    stats = _corpus_stats(source, where, where_params)
    return stats[0] <= EXACT_MAX_ROWS, stats


def _bm25_sql(source: SearchSource, where: str, where_params: list, query: str, limit: int, stats) -> tuple[str, list]:
    """Okapi BM25 computed in SQL from the stored tsvectors of the filtered corpus.

    Term frequency counts each lexeme's positions, weighted by their label (A or unlabelled:
    the item itself; B, C: context such as neighbouring turns); document frequency comes from
    the matching rows that pass the same filters, and the corpus size and average length from
    `_corpus_stats`, so the statistics are those of the corpus the caller can see.
    """
    table, vector = _table(source), source.search_vector_column
    if stats is None:
        # A small corpus (one user's items): counted in the same statement, from the same pages.
        corpus_sql = f"SELECT count(*)::float AS n, greatest(avg(length(t.{vector})), 1)::float AS avgdl FROM {table} t WHERE {where}"
        corpus_params = list(where_params)
    else:
        corpus_sql, corpus_params = "SELECT %s::float AS n, %s::float AS avgdl", list(stats)
    sql = f"""
        WITH query AS {_or_query_sql()},
        terms AS (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', %s))) AS lexeme),
        corpus AS ({corpus_sql}),
        matches AS (
            SELECT t.id, t.{vector} AS doc FROM {table} t, query
            WHERE {where} AND t.{vector} @@ query.q
        ),
        postings AS (
            SELECT m.id, u.lexeme,
                   coalesce((SELECT sum(CASE w WHEN 'B' THEN {WEIGHT_B} WHEN 'C' THEN {WEIGHT_C} ELSE 1.0 END)
                             FROM unnest(u.weights) w), 1)::float AS tf,
                   length(m.doc)::float AS dl
            FROM matches m, unnest(m.doc) u
            WHERE u.lexeme IN (SELECT lexeme FROM terms)
        ),
        df AS (SELECT lexeme, count(*)::float AS df FROM postings GROUP BY lexeme)
        SELECT p.id, sum(
            ln(1 + (greatest(corpus.n, df.df) - df.df + 0.5) / (df.df + 0.5))
            * p.tf * {BM25_K1 + 1} / (p.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * p.dl / corpus.avgdl))
        ) AS score
        FROM postings p JOIN df USING (lexeme), corpus
        GROUP BY p.id ORDER BY score DESC, p.id LIMIT %s
    """
    return sql, [query, query, *corpus_params, *where_params, limit]


def _embedding_sql(
    source: SearchSource, where: str, where_params: list, vector: str, limit: int, exact: bool, overfetch: bool = True
) -> tuple[str, list]:
    """Nearest neighbours by cosine distance.

    Across a scope the HNSW index answers (with pgvector's iterative scans, so filters still
    leave `limit` rows). Within one user's items the candidate set is small and the
    (organisation, scope, user) index finds it, so the distances are computed exactly: `+ 0`
    keeps the planner off the approximate index, whose recall suffers most when a filter
    keeps a tiny share of the graph.
    """
    table, column = _table(source), source.embedding_column
    order = f"(t.{column} <=> %s::vector) + 0" if exact else f"t.{column} <=> %s::vector"
    # The approximate scan over-fetches and the exact distances re-rank: with relaxed ordering
    # the first rows a filtered HNSW scan finds are not always the nearest.
    sql = f"""
        SELECT id, score FROM (
            SELECT t.id, 1 - (t.{column} <=> %s::vector) AS score FROM {table} t
            WHERE {where} AND t.{column} IS NOT NULL
            ORDER BY {order} LIMIT %s
        ) ranked ORDER BY score DESC, id LIMIT %s
    """
    fetched = max(limit * 3, 50) if overfetch and not exact else limit
    return sql, [vector, *where_params, vector, fetched, limit]


def _exact(source: SearchSource, filters: dict) -> bool:
    """One user's (or one session's) own items: few enough to rank exactly."""
    per_user = filters.get("user_id") is not None and source.user_column and not source.null_user_is_shared
    return bool(per_user or (filters.get("session_id") and source.session_column))


def _fuzzy_sql(source: SearchSource, where: str, where_params: list, query: str, limit: int) -> tuple[str, list]:
    table, expression = _table(source), source.fuzzy_expression
    sql = f"""
        SELECT t.id, word_similarity(%s, {expression}) AS score FROM {table} t
        WHERE {where} AND %s <%% {expression}
        ORDER BY score DESC, t.id LIMIT %s
    """
    return sql, [query, *where_params, query, limit]


def _recent_sql(source: SearchSource, where: str, where_params: list, limit: int) -> tuple[str, list]:
    sql = f"""
        SELECT t.id, 0.0 AS score FROM {_table(source)} t WHERE {where}
        ORDER BY t.{source.time_column} DESC, t.id LIMIT %s
    """
    return sql, [*where_params, limit]


def _hybrid_sql(source, where, where_params, query, vector, limit, stats, exact) -> tuple[str, list]:
    """Reciprocal-rank fusion of the keyword and embedding candidates, in one round trip."""
    candidates = max(limit * 3, 50)
    keyword_sql, keyword_params = _bm25_sql(source, where, where_params, query, candidates, stats)
    # The candidates are already an over-fetch of `limit`.
    embedding_sql, embedding_params = _embedding_sql(
        source, where, where_params, vector, candidates, exact, overfetch=False
    )
    sql = f"""
        WITH keyword AS ({keyword_sql}), semantic AS ({embedding_sql}),
        ranked AS (
            SELECT id, {RRF_KEYWORD_WEIGHT} AS weight, row_number() OVER (ORDER BY score DESC, id) AS rank
            FROM keyword
            UNION ALL
            SELECT id, {RRF_SEMANTIC_WEIGHT} AS weight, row_number() OVER (ORDER BY score DESC, id) AS rank
            FROM semantic
        )
        SELECT id, sum(weight / ({RRF_K} + rank)) AS score FROM ranked
        GROUP BY id ORDER BY score DESC, id LIMIT %s
    """
    return sql, [*keyword_params, *embedding_params, limit]


def _vector_literal(query: str) -> str:
    (vector,) = embed_texts([query])
    return "[" + ",".join(f"{value:.7g}" for value in vector) + "]"


def search_source(source: SearchSource, *, client, query: str, method: str, limit: int, filters: dict) -> list:
    """Returns [(instance, score)] of one memory type, best first, within the client's tenant and scopes."""
    if method not in METHODS:
        raise ValueError(f"Unknown search method {method!r}")
    where, where_params = _filters_sql(source, client=client, filters=filters)
    query = (query or "").strip()
    if not query:
        sql, params = _recent_sql(source, where, where_params, limit)
    elif method == "fuzzy":
        sql, params = _fuzzy_sql(source, where, where_params, query, limit)
    else:
        exact, stats = _plan(source, where, where_params, filters)
        if method == "bm25":
            sql, params = _bm25_sql(source, where, where_params, query, limit, stats)
        elif method == "embedding":
            sql, params = _embedding_sql(source, where, where_params, _vector_literal(query), limit, exact)
        else:
            sql, params = _hybrid_sql(source, where, where_params, query, _vector_literal(query), limit, stats, exact)

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return []
    # Vectors and tsvectors are not part of any result; parsing them would cost more than the search.
    instances = (
        source.model.objects.select_related(*source.select_related)
        .defer(source.embedding_column, source.search_vector_column)
        .in_bulk([row[0] for row in rows])
    )
    return [(instances[row_id], float(score)) for row_id, score in rows if row_id in instances and math.isfinite(score)]


def search(*, client, query: str, memory_types: list[str] | None, method: str | None, limit: int, filters: dict) -> list[Hit]:
    """Searches several memory types and merges them, best first, up to `limit` results."""
    hits = []
    for memory_type in memory_types or list(SOURCES):
        source = SOURCES[memory_type]
        for instance, score in search_source(
            source, client=client, query=query, method=method or source.default_method, limit=limit, filters=filters
        ):
            hits.append(Hit(source=source, instance=instance, score=score))
    if (query or "").strip():
        hits.sort(key=lambda hit: hit.score, reverse=True)
    else:
        hits.sort(key=lambda hit: getattr(hit.instance, hit.source.time_column), reverse=True)
    return hits[:limit]
