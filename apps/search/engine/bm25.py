"""Okapi BM25 in SQL from the stored tsvectors: the keyword ranking of `bm25` and of `hybrid`."""

from apps.search.engine.corpus import corpus_stats, lexeme_shares, visible_cte
from apps.search.registry import SearchSource

# A query term in more than this share of a large corpus is not used to find keyword matches.
COMMON_TERM_SHARE = 0.5
# Through the indexes, each term brings at most this many matches (and all terms as many again): below
# it BM25 is exact; above, the IDF is low and the document frequency comes from the planner's statistics.
TERM_MATCHES_CAP = 300
BM25_K1 = 1.2
BM25_B = 0.75
# An occurrence in a lower-weighted part of a document (A and the default D count 1).
WEIGHT_B = 0.5
WEIGHT_C = 0.25

# A lexeme quoted for the tsquery parser, its backslashes (chr 92) and quotes (chr 39) doubled.
_QUOTED_LEXEME = (
    "chr(39) || replace(replace(lexeme, chr(92), repeat(chr(92), 2)), chr(39), repeat(chr(39), 2)) || chr(39)"
)


def keyword_ctes(
    source: SearchSource, where: str, where_params: list, query: str, limit: int, stats, *, database: str
) -> tuple[str, list]:
    """CTEs ending in `keyword(id, score)`: term frequency weighted by label (B, C: context such as
    neighbouring turns), statistics of the corpus the caller sees: the `visible` CTE when `stats` is
    None, else the GIN index finds the matches and `stats` (`corpus_stats`) sizes the corpus."""
    common, corpus_params, matches_params, df_params = [], [], [], []
    if stats is None:
        corpus_sql = "SELECT count(*)::float AS n, greatest(avg(length(doc)), 1)::float AS avgdl FROM visible"
        matches_sql = "matches AS (SELECT v.id, v.doc FROM visible v, query WHERE v.doc @@ query.q)"
        df_sql = "df AS (SELECT lexeme, count(*)::float AS df FROM postings GROUP BY lexeme)"
    else:
        vector, table = source.search_vector_column, source.table
        # A term in most items would make each a match to score for an IDF below ln 2: left out
        # while the query has another one.
        elements, shares = lexeme_shares(source, database=database)
        common = sorted(element for element, share in zip(elements, shares) if share > COMMON_TERM_SHARE)
        corpus_sql, corpus_params = "SELECT %s::float AS n, %s::float AS avgdl", list(stats)
        # Bounded work whatever the corpus size: a term at the cap has its document frequency
        # estimated from its share in the planner's statistics; below it, counted.
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


def bm25_sql(source, where, where_params, query, limit, scan: bool, *, database: str) -> tuple[str, list]:
    stats = None if scan else corpus_stats(source, where, where_params, database=database)
    ctes, params = keyword_ctes(source, where, where_params, query, limit, stats, database=database)
    if scan:
        visible_sql, visible_params = visible_cte(source, where, where_params, None)
        ctes, params = f"{visible_sql}, {ctes}", [*visible_params, *params]
    visible_rows = "(SELECT count(*) FROM visible)" if scan else "NULL::bigint"
    return (
        f"WITH {ctes} SELECT id, score, {visible_rows} AS visible_rows FROM keyword ORDER BY score DESC, id",
        params,
    )
