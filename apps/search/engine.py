"""The one search engine: bm25, embedding, hybrid and fuzzy over every registered memory type.

Every query is built here from a SearchSource, so organisation and read scopes are applied
inside the SQL of every method and type alike; there is no other path.
"""

import functools
import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone
from psycopg.types.datetime import TimestamptzLoader

from apps.core.temporal import query_window
from apps.providers.embeddings import embed_query, embedding_model_name
from apps.search.decompose import decompose
from apps.search.registry import METHODS, SOURCES, SearchSource
from apps.search.rerank import rerank
from apps.tenancy.readers import Reader

RRF_K = 60
CORPUS_STATS_SECONDS = 300
# A query term in more than this share of a large corpus is not used to find keyword matches.
COMMON_TERM_SHARE = 0.5
# Through the indexes, each query term brings at most this many matches to score (and the items
# with every term as many again): below it BM25 is exact, above it the term is common enough
# that its IDF is low and its document frequency is estimated from the planner's statistics.
TERM_MATCHES_CAP = 300
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


def _filters_sql(source: SearchSource, *, reader: Reader, filters: dict) -> tuple[str, list]:
    """The WHERE clause every method shares: tenant and read scopes first, then the caller's filters."""
    table_session = "conversations_session"
    clauses = ["t.organization_id = %s", "t.scope = ANY(%s)"]
    params: list = [reader.organization_id, list(reader.read_scopes)]
    if source.shared_where:
        if filters.get("user_id") is None:
            clauses.append(source.shared_where)
        else:
            clauses.append(
                f"({source.shared_where} OR EXISTS (SELECT 1 FROM tenancy_enduser e"
                f" WHERE e.organization_id = %s AND e.user_id = %s AND {source.user_where}))"
            )
            params += [reader.organization_id, filters["user_id"]]
    elif filters.get("user_id") is not None and source.user_column:
        clauses.append(
            f"t.{source.user_column} = (SELECT id FROM tenancy_enduser WHERE organization_id = %s AND user_id = %s)"
        )
        params += [reader.organization_id, filters["user_id"]]
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
            params += [reader.organization_id, *session_params]
    if filters.get("start"):
        clauses.append(f"t.{source.time_column} >= %s")
        params.append(filters["start"])
    if filters.get("end"):
        clauses.append(f"t.{source.time_column} <= %s")
        params.append(filters["end"])
    window = filters.get("window")
    if window:
        clause, window_params = _window_sql(source, window)
        if clause:
            clauses.append(clause)
            params += window_params
    if source.extra_where:
        clauses.append(f"({source.extra_where})")
    return " AND ".join(clauses), params


def _window_sql(source: SearchSource, window: TimeWindow) -> tuple[str, list]:
    """Items that happened within the window's days or whose words name a day in it."""
    conditions, params = [], []
    if source.event_time_column:
        first = datetime.combine(window.start, time.min, tzinfo=UTC)
        conditions.append(f"(t.{source.event_time_column} >= %s AND t.{source.event_time_column} < %s)")
        params += [first, first + timedelta(days=(window.end - window.start).days + 1)]
    if source.date_span_column:
        conditions.append(f"t.{source.date_span_column} && daterange(%s, %s, '[]')")
        params += [window.start, window.end]
    return ("(" + " OR ".join(conditions) + ")" if conditions else ""), params


def _table(source: SearchSource) -> str:
    return source.model._meta.db_table


def _cache_key(kind: str, source: SearchSource, where: str, where_params: list) -> str:
    return f"search:{kind}:" + hashlib.sha256(f"{_table(source)}|{where}|{where_params!r}".encode()).hexdigest()


def _cached(kind: str, source: SearchSource, where: str, where_params: list, compute):
    """A figure about the visible corpus, kept for CORPUS_STATS_SECONDS per filter set: such figures
    move slowly, and counting them on every query would cost more than the query."""
    key = _cache_key(kind, source, where, where_params)
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CORPUS_STATS_SECONDS)
    return value


def _owned(source: SearchSource, filters: dict) -> bool:
    """One user's (or one session's) own items."""
    per_user = filters.get("user_id") is not None and source.user_column and not source.shared_where
    return bool(per_user or (filters.get("session_id") and source.session_column))


def _scans(source: SearchSource, where: str, where_params: list, owned: bool) -> bool:
    """Whether the caller sees few enough items (SEARCH_SCAN_MAX_ROWS) to read them all once.

    One user's items are a few hundred or thousand rows: reading them through the
    owner's index and scoring them exactly costs far less than walking the
    GIN posting lists and the HNSW graph of the whole table, so the latency follows the size of
    what the caller sees, not the size of the table. Exact ranking also keeps a small tenant
    from losing its rows in a large shared HNSW graph, where a filtered approximate scan can
    miss them altogether.

    Owned items are scanned without counting them first: the scan reports how many it read
    (`visible_rows`), and `search_source` remembers an owner with more than the limit, whose
    next searches use the indexes. A scope is counted (up to the limit) and the count cached.
    """
    cap = settings.SEARCH_SCAN_MAX_ROWS
    if owned:
        return not cache.get(_cache_key(f"large:{cap}", source, where, where_params))

    def count():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {_table(source)} t WHERE {where} LIMIT %s) visible",
                [*where_params, cap + 1],
            )
            return cursor.fetchone()[0]

    return _cached(f"rows:{cap}", source, where, where_params, count) <= cap


def _corpus_stats(source: SearchSource, where: str, where_params: list) -> tuple[float, float]:
    """Number of documents and average document length of a large visible corpus (cached)."""
    vector = source.search_vector_column

    def compute():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*), coalesce(avg(length(t.{vector})), 1) FROM {_table(source)} t WHERE {where}",
                where_params,
            )
            count, average = cursor.fetchone()
        return float(count), max(float(average), 1.0)

    return _cached("corpus", source, where, where_params, compute)


def _lexeme_shares(source: SearchSource) -> tuple[list[str], list[float]]:
    """The most common lexemes of the table's items and the share of items holding each, from the
    planner's statistics (ANALYZE samples each tsvector column's most common elements)."""
    table, column = _table(source), source.search_vector_column

    def compute():
        with connection.cursor() as cursor:
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

    return _cached("shares", source, "", [], compute)


def _visible_cte(source: SearchSource, where: str, where_params: list, vector: QueryVector | None) -> tuple[str, list]:
    """`visible(id, doc, distance)`: every item the caller sees, read once for both rankings (the
    distance only for vectors of the query's model)."""
    distance = (
        f"CASE WHEN t.embedding_model = %s THEN t.{source.embedding_column} <=> %s::vector END"
        if vector
        else "NULL::float8"
    )
    sql = (
        f"visible AS MATERIALIZED (SELECT t.id, t.{source.search_vector_column} AS doc, {distance} AS distance"
        f" FROM {_table(source)} t WHERE {where})"
    )
    return sql, ([vector.model, vector.literal] if vector else []) + list(where_params)


# A lexeme quoted for the tsquery parser, its backslashes (chr 92) and quotes (chr 39) doubled.
_QUOTED_LEXEME = (
    "chr(39) || replace(replace(lexeme, chr(92), repeat(chr(92), 2)), chr(39), repeat(chr(39), 2)) || chr(39)"
)


def _keyword_ctes(
    source: SearchSource, where: str, where_params: list, query: str, limit: int, stats
) -> tuple[str, list]:
    """CTEs ending in `keyword(id, score)`: Okapi BM25 computed in SQL from the stored tsvectors.

    Term frequency counts each lexeme's positions, weighted by their label (A or unlabelled:
    the item itself; B, C: context such as neighbouring turns); document frequency comes from
    the matching items that pass the same filters. With `stats` None the corpus is the
    `visible` CTE, counted in the same statement; otherwise the GIN index finds the matches
    and `stats` (`_corpus_stats`) gives the corpus size and average length. Either way the
    statistics are those of the corpus the caller can see.
    """
    common: list[str] = []
    if stats is None:
        corpus_sql, corpus_params = (
            "SELECT count(*)::float AS n, greatest(avg(length(doc)), 1)::float AS avgdl FROM visible",
            [],
        )
        matches_sql = "matches AS (SELECT v.id, v.doc FROM visible v, query WHERE v.doc @@ query.q)"
        df_sql = "df AS (SELECT lexeme, count(*)::float AS df FROM postings GROUP BY lexeme)"
        matches_params, df_params = [], []
    else:
        vector, table = source.search_vector_column, _table(source)
        # Through the GIN index, a term found in most items would make every one of them a
        # match to score, for almost nothing: its IDF is below ln 2. Such terms are left out
        # while the query has another one.
        elements, shares = _lexeme_shares(source)
        common = sorted(element for element, share in zip(elements, shares) if share > COMMON_TERM_SHARE)
        corpus_sql, corpus_params = "SELECT %s::float AS n, %s::float AS avgdl", list(stats)
        # The matches scored are each term's first TERM_MATCHES_CAP items and as many items with
        # every term, so the work is bounded whatever the corpus size. A term with fewer matches
        # brings them all and its document frequency is counted; a term at the cap is found in
        # at least that many items, and its share in the planner's statistics estimates how many.
        matches_sql = f"""
            term_matches AS MATERIALIZED (
                SELECT terms.lexeme, found.id, found.doc FROM terms, LATERAL (
                    SELECT t.id, t.{vector} AS doc FROM {table} t
                    WHERE {where} AND t.{vector} @@ ({_QUOTED_LEXEME})::tsquery LIMIT %s
                ) found
            ),
            every_term AS (
                SELECT t.id, t.{vector} AS doc FROM {table} t, query
                WHERE {where} AND t.{vector} @@ query.every AND (SELECT count(*) FROM terms) > 1 LIMIT %s
            ),
            matches AS (
                SELECT DISTINCT ON (id) id, doc FROM (
                    SELECT id, doc FROM term_matches UNION ALL SELECT id, doc FROM every_term
                ) found ORDER BY id
            )"""
        matches_params = [*where_params, TERM_MATCHES_CAP, *where_params, TERM_MATCHES_CAP]
        df_sql = """df AS (
            SELECT lexeme, CASE WHEN count(*) < %s THEN count(*)::float ELSE greatest(count(*)::float, corpus.n * coalesce(
                (SELECT share FROM unnest(%s::text[], %s::float8[]) statistics(element, share) WHERE element = lexeme), 0
            )) END AS df
            FROM term_matches, corpus GROUP BY lexeme, corpus.n
        )"""
        df_params = [TERM_MATCHES_CAP, elements, shares]
    sql = f"""
        query_terms AS (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', %s))) AS lexeme),
        terms AS (
            SELECT lexeme FROM query_terms
            WHERE lexeme <> ALL(%s::text[]) OR NOT EXISTS (SELECT 1 FROM query_terms WHERE lexeme <> ALL(%s::text[]))
        ),
        -- Any term may match (questions rarely contain every word of the answer); `every`
        -- finds the items with all of them.
        query AS (
            SELECT coalesce(string_agg({_QUOTED_LEXEME}, ' | '), '')::tsquery AS q,
                   coalesce(string_agg({_QUOTED_LEXEME}, ' & '), '')::tsquery AS every
            FROM terms
        ),
        corpus AS ({corpus_sql}),
        {matches_sql},
        postings AS (
            SELECT m.id, u.lexeme,
                   coalesce((SELECT sum(CASE w WHEN 'B' THEN {WEIGHT_B} WHEN 'C' THEN {WEIGHT_C} ELSE 1.0 END)
                             FROM unnest(u.weights) w), 1)::float AS tf,
                   length(m.doc)::float AS dl
            FROM matches m, unnest(m.doc) u
            WHERE u.lexeme IN (SELECT lexeme FROM terms)
        ),
        {df_sql},
        keyword AS (
            SELECT p.id, sum(
                ln(1 + (greatest(corpus.n, df.df) - df.df + 0.5) / (df.df + 0.5))
                * p.tf * {BM25_K1 + 1} / (p.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * p.dl / corpus.avgdl))
            ) AS score
            FROM postings p JOIN df USING (lexeme), corpus
            GROUP BY p.id ORDER BY score DESC, p.id LIMIT %s
        )
    """
    return sql, [query, common, common, *corpus_params, *matches_params, *df_params, limit]


def _bm25_sql(source, where, where_params, query, limit, scan: bool) -> tuple[str, list]:
    ctes, params = [], []
    if scan:
        visible_sql, visible_params = _visible_cte(source, where, where_params, None)
        ctes.append(visible_sql)
        params += visible_params
    keyword_sql, keyword_params = _keyword_ctes(
        source, where, where_params, query, limit, None if scan else _corpus_stats(source, where, where_params)
    )
    ctes.append(keyword_sql)
    params += keyword_params
    visible_rows = "(SELECT count(*) FROM visible)" if scan else "NULL::bigint"
    return (
        f"WITH {', '.join(ctes)} SELECT id, score, {visible_rows} AS visible_rows FROM keyword ORDER BY score DESC, id",
        params,
    )


def _nearest_sql(
    source: SearchSource, where: str, where_params: list, vector: QueryVector, limit: int, scan: bool
) -> tuple[str, list]:
    """`SELECT id, score, visible_rows` of the nearest items by cosine distance, among the vectors
    of the query's model.

    A scan computes every visible distance (`+ 0` keeps the planner off the approximate index).
    Otherwise the HNSW index answers, with pgvector's iterative scans so filters still leave
    `limit` rows.
    """
    table, column = _table(source), source.embedding_column
    order = f"(t.{column} <=> %s::vector) + 0" if scan else f"t.{column} <=> %s::vector"
    # A scan also counts what it read (the window runs before the LIMIT).
    visible_rows = "count(*) OVER ()" if scan else "NULL::bigint"
    sql = f"""
        SELECT t.id, 1 - (t.{column} <=> %s::vector) AS score, {visible_rows} AS visible_rows FROM {table} t
        WHERE {where} AND t.{column} IS NOT NULL AND t.embedding_model = %s ORDER BY {order} LIMIT %s
    """
    return sql, [vector.literal, *where_params, vector.model, vector.literal, limit]


def _embedding_sql(source, where, where_params, vector: QueryVector, limit: int, scan: bool) -> tuple[str, list]:
    # An approximate scan over-fetches and the exact distances re-rank: with relaxed ordering
    # the first rows a filtered HNSW scan finds are not always the nearest.
    nearest_sql, params = _nearest_sql(source, where, where_params, vector, limit if scan else max(limit * 3, 50), scan)
    return f"SELECT id, score, visible_rows FROM ({nearest_sql}) nearest ORDER BY score DESC, id LIMIT %s", [
        *params,
        limit,
    ]


def _hybrid_sql(source, where, where_params, query, vector, limit, scan: bool) -> tuple[str, list]:
    """Reciprocal-rank fusion of the keyword and embedding candidates, in one round trip."""
    candidates = max(limit * 3, 50)
    ctes, params = [], []
    if scan:
        visible_sql, visible_params = _visible_cte(source, where, where_params, vector)
        keyword_sql, keyword_params = _keyword_ctes(source, where, where_params, query, candidates, None)
        semantic_sql = (
            "SELECT id, 1 - distance AS score FROM visible WHERE distance IS NOT NULL ORDER BY distance, id LIMIT %s"
        )
        ctes += [visible_sql, keyword_sql, f"semantic AS ({semantic_sql})"]
        params += [*visible_params, *keyword_params, candidates]
    else:
        stats = _corpus_stats(source, where, where_params)
        keyword_sql, keyword_params = _keyword_ctes(source, where, where_params, query, candidates, stats)
        semantic_sql, semantic_params = _nearest_sql(source, where, where_params, vector, candidates, scan=False)
        ctes += [keyword_sql, f"semantic AS ({semantic_sql})"]
        params += [*keyword_params, *semantic_params]
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


def _fuzzy_sql(source: SearchSource, where: str, where_params: list, query: str, limit: int) -> tuple[str, list]:
    table, expression = _table(source), source.fuzzy_expression
    sql = f"""
        SELECT t.id, word_similarity(%s, {expression}) AS score, NULL::bigint AS visible_rows FROM {table} t
        WHERE {where} AND %s <%% {expression}
        ORDER BY score DESC, t.id LIMIT %s
    """
    return sql, [query, *where_params, query, limit]


def _recent_sql(source: SearchSource, where: str, where_params: list, limit: int) -> tuple[str, list]:
    sql = f"""
        SELECT t.id, 0.0 AS score, NULL::bigint AS visible_rows FROM {_table(source)} t WHERE {where}
        ORDER BY t.{source.time_column} DESC, t.id LIMIT %s
    """
    return sql, [*where_params, limit]


def _query_vector(query: str) -> QueryVector:
    return _embedded_query(query, embedding_model_name())


@functools.lru_cache(maxsize=256)
def _embedded_query(query: str, model: str) -> QueryVector:
    """A query's vector, kept for the next search of the same words by the same model (a boosted
    search, each memory type of a search and the rerank stage ask for it again)."""
    vector = embed_query(query)
    return QueryVector(literal="[" + ",".join(f"{value:.7g}" for value in vector) + "]", model=model)


def _ranking_sql(
    source: SearchSource, *, reader: Reader, query: str, method: str, limit: int, filters: dict
) -> tuple[str, list]:
    """`SELECT id, score` of the best items of one memory type, within the reader's organisation and read scopes."""
    if method not in METHODS:
        raise ValueError(f"Unknown search method {method!r}")
    where, where_params = _filters_sql(source, reader=reader, filters=filters)
    query = (query or "").strip()
    if not query:
        return _recent_sql(source, where, where_params, limit)
    if method == "fuzzy":
        return _fuzzy_sql(source, where, where_params, query, limit)
    scan = _scans(source, where, where_params, _owned(source, filters))
    if method == "bm25":
        return _bm25_sql(source, where, where_params, query, limit, scan)
    if method == "embedding":
        return _embedding_sql(source, where, where_params, _query_vector(query), limit, scan)
    return _hybrid_sql(source, where, where_params, query, _query_vector(query), limit, scan)


@functools.cache
def _row_layout(source: SearchSource, candidate_rows: bool = False) -> tuple[list[str], str, list[tuple]]:
    """The columns a result row carries: the item's own (but its vector and tsvector, which no
    result shows and which cost more to parse than the search) and those of its select_related
    objects, as (select list, joins, [(relation name or None, model, fields)]).

    A candidate row (`candidate_rows`) carries only what a reranker reads (the source's
    `candidate_fields`, or else every own column) and no related rows: the hits kept after the
    rerank are then read in full by `_completed`, so a search of 50 candidates parses 10 full rows."""
    skipped = {source.embedding_column, source.search_vector_column}
    own = [f for f in source.model._meta.concrete_fields if f.column not in skipped]
    if candidate_rows and source.candidate_fields:
        wanted = {source.model._meta.pk.name, *source.candidate_fields}
        own = [f for f in own if f.name in wanted]
    groups = [(None, source.model, "t", own)]
    joins = []
    for number, name in enumerate(() if candidate_rows else source.select_related):
        field = source.model._meta.get_field(name)
        related, alias = field.related_model, f"r{number}"
        # A lookup by key per row (the fence, OFFSET 0, keeps the planner from hashing the whole
        # related table for a few dozen rows, which costs more than the search on a small one).
        joins.append(
            f"LEFT JOIN LATERAL (SELECT * FROM {related._meta.db_table} {alias}"
            f" WHERE {alias}.{related._meta.pk.column} = t.{field.column} OFFSET 0) {alias} ON true"
        )
        groups.append((name, related, alias, list(related._meta.concrete_fields)))
    columns = [f"{alias}.{field.column}" for _, _, alias, fields in groups for field in fields]
    return columns, " ".join(joins), [(name, model, fields) for name, model, _, fields in groups]


def search_sql(
    source: SearchSource,
    *,
    reader: Reader,
    query: str,
    method: str,
    limit: int,
    filters: dict,
    candidate_rows: bool = False,
) -> tuple[str, list]:
    """The one statement answering a search of one memory type: the ranking, and the result rows
    (or, with `candidate_rows`, the candidate rows of `_row_layout`) read in the same round trip.
    Rows: score, the number of items a scan read (or NULL), then the columns, best first."""
    ranking_sql, params = _ranking_sql(source, reader=reader, query=query, method=method, limit=limit, filters=filters)
    columns, joins, _ = _row_layout(source, candidate_rows)
    sql = f"""
        WITH hits AS ({ranking_sql})
        SELECT hits.score, hits.visible_rows, {", ".join(columns)} FROM hits JOIN {_table(source)} t ON t.id = hits.id {joins}
        ORDER BY hits.score DESC, t.{source.time_column} DESC, t.id
    """
    return sql, params


@functools.cache
def _loaders(source: SearchSource, candidate_rows: bool = False) -> list[tuple]:
    """Per group of `_row_layout`: the relation (None: the item itself), its model, the attnames of
    its columns, [(position, database converters)] of those that have converters, and where its
    primary key stands among them."""
    _, _, groups = _row_layout(source, candidate_rows)
    return [
        (
            None if name is None else source.model._meta.get_field(name),
            model,
            [f.attname for f in fields],
            [(index, found) for index, f in enumerate(fields) if (found := f.get_db_converters(connection))],
            fields.index(model._meta.pk),
        )
        for name, model, fields in groups
    ]


def _result_sets(statements: list[tuple[str, list]]) -> list[list[tuple]]:
    """The rows of each of several statements reading result rows, sent in one round trip (a
    search of several memory types waits for the database once, not once per type).

    Their timestamps are parsed by psycopg's own (compiled) loader rather than Django's, a
    pure-Python subclass that took most of the time of reading 50 rows (3.6 ms against 0.5): the
    same aware datetimes, in the connection's time zone, which Django sets to UTC."""
    with connection.cursor() as cursor:
        cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        cursor.execute(
            ";\n".join(sql for sql, _ in statements), [param for _, params in statements for param in params]
        )
        results = [cursor.fetchall()]
        while cursor.nextset():
            results.append(cursor.fetchall())
    return results


def _instances(source: SearchSource, rows, candidate_rows: bool = False) -> list[tuple]:
    """Model instances from `search_sql` rows, with their select_related objects attached. A related
    row that several items share (their user, their session) is built once. A candidate row gives
    an instance whose other fields are deferred."""
    loaders = _loaders(source, candidate_rows)
    database = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy, looked up on every use
    related = {}
    results = []
    for score, _visible_rows, *values in rows:
        if not math.isfinite(score):
            continue
        instance, position = None, 0
        for relation, model, attnames, converters, pk_index in loaders:
            chunk = values[position : position + len(attnames)]
            position += len(attnames)
            if relation is not None:
                if chunk[pk_index] is None:
                    continue
                key = (relation.name, chunk[pk_index])
                if key in related:
                    relation.set_cached_value(instance, related[key])
                    continue
            for index, field_converters in converters:
                for convert in field_converters:
                    chunk[index] = convert(chunk[index], None, database)
            loaded = model.from_db(DEFAULT_DB_ALIAS, attnames, chunk)
            if relation is None:
                instance = loaded
            else:
                related[key] = loaded
                relation.set_cached_value(instance, loaded)
        results.append((instance, float(score)))
    return results


def search_source(source: SearchSource, *, reader: Reader, query: str, method: str, limit: int, filters: dict) -> list:
    """Returns [(instance, score)] of one memory type, best first, within the reader's organisation and read scopes."""
    sql, params = search_sql(source, reader=reader, query=query, method=method, limit=limit, filters=filters)
    (rows,) = _result_sets([(sql, params)])
    return _source_results(source, rows, reader=reader, filters=filters, candidate_rows=False)


def _source_results(source: SearchSource, rows, *, reader: Reader, filters: dict, candidate_rows: bool) -> list:
    """[(instance, score)] from the rows of one type's `search_sql`, noting an owner too large to scan."""
    cap = settings.SEARCH_SCAN_MAX_ROWS
    if rows and rows[0][1] is not None and rows[0][1] > cap:
        # An owner with more items than a scan should read: their next searches use the indexes.
        where, where_params = _filters_sql(source, reader=reader, filters=filters)
        cache.set(_cache_key(f"large:{cap}", source, where, where_params), True, CORPUS_STATS_SECONDS)
    return _instances(source, rows, candidate_rows)


def _completed(hits: list[Hit]) -> list[Hit]:
    """Candidate hits with their items read in full, related objects attached: a statement per
    memory type, by primary key (the ids come from a statement that applied the reader's scopes),
    in one round trip. An item deleted in between is left out."""
    ids_by_source: dict[SearchSource, list] = {}
    for hit in hits:
        ids_by_source.setdefault(hit.source, []).append(hit.instance.pk)
    statements = []
    for source, ids in ids_by_source.items():
        columns, joins, _ = _row_layout(source)
        statements.append(
            (f"SELECT 0.0, NULL, {', '.join(columns)} FROM {_table(source)} t {joins} WHERE t.id = ANY(%s)", [ids])
        )
    full = {}
    for source, rows in zip(ids_by_source, _result_sets(statements) if statements else []):
        for instance, _ in _instances(source, rows):
            full[source.memory_type, instance.pk] = instance
    return [
        Hit(source=hit.source, instance=full[hit.source.memory_type, hit.instance.pk], score=hit.score)
        for hit in hits
        if (hit.source.memory_type, hit.instance.pk) in full
    ]


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
    """The best `limit` items of each memory type (or `type_limits[type]`, when lower) for one
    query, merged: best first with a query, newest first without. With `candidate_rows`, each item
    holds only what a reranker reads (`_completed` reads the rest)."""
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
    hits = [
        Hit(source=source, instance=instance, score=score)
        for source, rows in zip(sources, _result_sets(statements))
        for instance, score in _source_results(
            source, rows, reader=reader, filters=filters, candidate_rows=candidate_rows
        )
    ]
    if not (query or "").strip():
        hits.sort(key=lambda hit: getattr(hit.instance, hit.source.time_column), reverse=True)
        return hits
    hits.sort(key=lambda hit: hit.score, reverse=True)
    return _capped(hits)


def rrf_scores(rankings, *, key) -> dict:
    """Reciprocal-rank fusion of several rankings: {key(item): (its first item, the sum of
    1 / (RRF_K + rank) over the rankings holding it)}, in the order keys were first seen."""
    fused: dict = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            first, score = fused.get(key(item), (item, 0.0))
            fused[key(item)] = (first, score + 1.0 / (RRF_K + rank))
    return fused


def _fused(rankings: list[list[Hit]]) -> list[Hit]:
    """The rankings of several queries (the question and its parts) fused: an item found by several
    of them, or near the top of one, comes first."""
    fused = rrf_scores(rankings, key=lambda hit: (hit.source.memory_type, hit.instance.pk))
    order = sorted(fused.values(), key=lambda pair: -pair[1])  # stable: ties keep the question's own order
    return _capped([Hit(source=hit.source, instance=hit.instance, score=score) for hit, score in order])


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
    """Searches several memory types and merges them, best first, up to `limit` results.

    `type_limits` ({memory_type: n}) reads at most n candidates of a type, for a caller that
    keeps no more of it than that.

    With a query naming a time ("last May", "in 2022", resolved against `now`, default the present)
    and `time_window` (default SEARCH_TIME_WINDOW) other than `off`, the window filters the items
    or boosts those within it (TimeWindow). With a query and a decomposer (`decomposer`, default
    QUERY_DECOMPOSER) other than `none`, each sub-query it proposes is searched too and the
    rankings are fused. With a query and a reranker (`reranker`, default RERANKER) other than
    `none`, the best max(limit, RERANK_CANDIDATES) hits are reordered by it, against the question,
    before the cut.
    """
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
        hits = _fused([hits, *(_merged(query=subquery, limit=candidates, **arguments) for subquery in subqueries)])
    if window is not None and window.mode == "boost":
        within = _merged(query=query, limit=candidates, **{**arguments, "filters": {**filters, "window": window}})
        hits = _fused([hits, within])
    if not reranking:
        return Hits(hits[:limit], decomposed_into=subqueries, time_window=window)
    reranked, reranked_by = rerank(query, hits[:candidates], reranker=reranker, reader=reader)
    return Hits(_completed(reranked[:limit]), reranked_by=reranked_by, decomposed_into=subqueries, time_window=window)


def _time_window(query: str, *, mode: str, now: datetime | None) -> TimeWindow | None:
    if mode == "off" or not (query or "").strip():
        return None
    resolved = query_window(query, timezone.localtime(now or timezone.now()))
    if resolved is None:
        return None
    return TimeWindow(expression=resolved.expression, start=resolved.start, end=resolved.end, mode=mode)


def _capped(hits: list[Hit]) -> list[Hit]:
    """Ranked among other types, a type with a `mixed_cap` keeps only its best that many hits (a page
    summarising a person matches every question naming them, and rank 1 of a user's few pages
    scores as high as rank 1 of their thousands of turns)."""
    if len({hit.source.memory_type for hit in hits}) < 2:
        return hits  # a search of one type keeps every hit
    caps = {hit.source.memory_type: hit.source.mixed_cap() for hit in hits if hit.source.mixed_cap}
    seen = Counter()
    kept = []
    for hit in hits:
        seen[hit.source.memory_type] += 1
        if seen[hit.source.memory_type] <= caps.get(hit.source.memory_type, len(hits)):
            kept.append(hit)
    return kept
