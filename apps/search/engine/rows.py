"""From SQL to hits: the statement reading a type's ranking with its result rows, the columns those
rows carry, several statements in one round trip, and model instances built from the rows."""

import functools
import hashlib
import math
import re
import weakref

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models.base import Model, ModelState
from django.db.models.signals import post_init, pre_init
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.types.datetime import TimestamptzLoader

from apps.search.engine.hits import Hit
from apps.search.engine.ranking import ranking_sql
from apps.search.engine.scoping import visibility_sql
from apps.search.registry import SearchSource
from apps.tenancy.readers import Reader


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
    (or, with `candidate_rows`, the candidate rows of `row_layout`) read in the same round trip.
    Rows: score, the number of items a scan read (or NULL), then the columns, best first."""
    ranking, params = ranking_sql(source, reader=reader, query=query, method=method, limit=limit, filters=filters)
    columns, joins, _ = row_layout(source, candidate_rows)
    sql = f"""
        WITH hits AS ({ranking})
        SELECT hits.score, hits.visible_rows, {", ".join(columns)} FROM hits JOIN {source.table} t ON t.id = hits.id {joins}
        ORDER BY hits.score DESC, t.{source.time_column} DESC, t.id
    """
    return sql, params


@functools.cache
def row_layout(source: SearchSource, candidate_rows: bool = False) -> tuple[list[str], str, list[tuple]]:
    """The columns a result row carries: the item's own (but its vector and tsvector, which no
    result shows and which cost more to parse than the search) and those of its select_related
    objects, as (select list, joins, [(relation name or None, model, fields)]).

    A candidate row (`candidate_rows`) carries only what a reranker reads (the source's
    `candidate_fields`, or else every own column) and no related rows: the hits kept after the
    rerank are then read in full by `completed`, so a search of 50 candidates parses 10 full rows."""
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


@functools.cache
def _loaders(source: SearchSource, candidate_rows: bool = False) -> list[tuple]:
    """Per group of `row_layout`: the relation (None: the item itself), its model, the attnames of
    its columns, [(position, database converters)] of those that have converters, and where its
    primary key stands among them."""
    _, _, groups = row_layout(source, candidate_rows)
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


# The names of the statements prepared on each open connection (a psycopg connection, lent by the
# pool to one request at a time); None: unknown after a failed batch, so all are deallocated first.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLACEHOLDER = re.compile(r"%(%|s)")


@functools.lru_cache(maxsize=512)
def _prepare_sql(sql: str, types: tuple[str, ...]) -> tuple[str, str, str]:
    """A statement's name, its PREPARE (its parameters typed as the values sent for them are, the
    `%s` placeholders numbered) and its text as a comment for the EXECUTE (so the server's activity,
    its logs and a captured query show what ran, with placeholders, not values), escaped for the
    client-side binding that sends them.

    The types matter: an untyped parameter is inferred from its context, which may pick another
    function than the value would (`substring(text, $1)` takes a pattern, `substring(text, 16)` a
    position)."""
    name = "search_" + hashlib.sha256(f"{types}|{sql}".encode()).hexdigest()[:24]
    numbers = iter(range(1, sql.count("%s") + 1))
    body = _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else f"${next(numbers)}", sql)
    body = body.replace("%", "%%")
    return name, f"PREPARE {name} ({', '.join(types)}) AS {body}", f"/* {body} */"


def _types(params: list, transformer: Transformer) -> tuple[str, ...]:
    """The type of each value as client-side binding writes it (a string or a list of strings is
    an untyped literal, `unknown`, as in the statement it replaces)."""
    types = []
    for value in params:
        items = [item for item in value if item is not None] if isinstance(value, list | tuple) else None
        sample = items[0] if items else (None if items is not None else value)
        oid = 0 if sample is None else transformer.get_dumper(sample, PyFormat.TEXT).oid
        info = transformer.adapters.types.get(oid) if oid else None
        types.append("unknown" if info is None else f"{info.regtype}[]" if items is not None else info.regtype)
    return tuple(types)


def _as_prepared(statements: list[tuple[str, list]], raw_connection, transformer: Transformer) -> tuple[str, list, set]:
    """The batch sending `statements` as prepared statements run with their generic plan.

    PostgreSQL planned a search's statement afresh each time, for longer than it ran (1.0-1.4 ms of
    planning against 0.7 ms of execution for a user's 50 candidates): the same statement with other
    values is now prepared once per connection and executed with its generic plan
    (`plan_cache_mode = force_generic_plan`, for this batch's transaction only). Which plan shape a
    search needs (a scan of what the caller sees, or the GIN and HNSW indexes) is decided here, not
    by the planner, so one plan per shape serves every value."""
    known = _PREPARED.get(raw_connection)
    parts = [] if known is not None else ["DEALLOCATE ALL"]
    known = set() if known is None else known
    new, executes = set(), []
    for sql, params in statements:
        name, prepare, text = _prepare_sql(sql, _types(params, transformer))
        if name not in known and name not in new:
            parts.append(prepare)
            new.add(name)
        arguments = f"({', '.join(['%s'] * len(params))})" if params else ""
        executes.append(f"EXECUTE {name}{arguments} {text}")
    parts += ["SET LOCAL plan_cache_mode = force_generic_plan", *executes]
    return ";\n".join(parts), [param for _, params in statements for param in params], known | new


def result_sets(statements: list[tuple[str, list]], *, database: str = DEFAULT_DB_ALIAS) -> list[list[tuple]]:
    """The rows of each of several statements reading result rows, sent in one round trip (a
    search of several memory types waits for the database once, not once per type), as prepared
    statements with their generic plan (`_as_prepared`; off with SEARCH_PREPARED_STATEMENTS=false,
    e.g. behind a pooler that lends another server connection for each transaction).

    Their timestamps are parsed by psycopg's own (compiled) loader rather than Django's, a
    pure-Python subclass that took most of the time of reading 50 rows (3.6 ms against 0.5): the
    same aware datetimes, in the connection's time zone, which Django sets to UTC."""
    wrapper = connections[database]
    with wrapper.cursor() as cursor:
        cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        if settings.SEARCH_PREPARED_STATEMENTS:
            raw_connection = wrapper.connection
            sql, params, prepared = _as_prepared(statements, raw_connection, Transformer(cursor.cursor))
            _PREPARED[raw_connection] = None  # unknown until the batch has run
        else:
            sql, params = ";\n".join(sql for sql, _ in statements), [p for _, ps in statements for p in ps]
        cursor.execute(sql, params)
        results = [cursor.fetchall()] if _has_rows(cursor.cursor) else []
        while cursor.nextset():
            if _has_rows(cursor.cursor):
                results.append(cursor.fetchall())
        if settings.SEARCH_PREPARED_STATEMENTS:
            _PREPARED[raw_connection] = prepared
    return results


def _has_rows(cursor) -> bool:
    """Whether the current result of a batch is rows (not a PREPARE's or a SET's status): asked of the
    result itself, as `cursor.description` would build a column description per call."""
    return cursor.pgresult is not None and cursor.pgresult.status == pq.ExecStatus.TUPLES_OK


_FROM_DB = Model.from_db.__func__


def _builder(model):
    """A function (database, attnames, values) -> instance doing what `model.from_db` does, without
    running Model.__init__ where nothing listens to its signals: the values go into the instance's
    __dict__ as __init__ would put them (a field not among `attnames` is deferred, as from_db leaves
    it). __init__ assigns every concrete field one by one, which took a fifth of a search's Python
    time for its 60 rows."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model) or model.from_db.__func__ is not _FROM_DB:
        return model.from_db
    return functools.partial(_from_db, model)


def _from_db(model, database: str, attnames: list[str], values: list):
    instance = model.__new__(model)
    instance.__dict__.update(zip(attnames, values))
    state = instance._state = ModelState()
    state.adding, state.db = False, database
    return instance


def instances(
    source: SearchSource, rows, candidate_rows: bool = False, *, database: str = DEFAULT_DB_ALIAS
) -> list[tuple]:
    """Model instances from `search_sql` rows, with their select_related objects attached. A related
    row that several items share (their user, their session) is built once. A candidate row gives
    an instance whose other fields are deferred. The instances belong to `database` (where they were
    read), so what they load lazily is read there too."""
    loaders = _loaders(source, candidate_rows)
    builders = [_builder(model) for _, model, *_ in loaders]
    wrapper = connections[database]  # not the `connection` proxy, looked up on every use
    related = {}
    results = []
    for score, _visible_rows, *values in rows:
        if not math.isfinite(score):
            continue
        instance, position = None, 0
        for (relation, _, attnames, converters, pk_index), build in zip(loaders, builders):
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
                    chunk[index] = convert(chunk[index], None, wrapper)
            loaded = build(database, attnames, chunk)
            if relation is None:
                instance = loaded
            else:
                related[key] = loaded
                relation.set_cached_value(instance, loaded)
        results.append((instance, float(score)))
    return results


def completed(hits: list[Hit], *, reader: Reader, user_id: str | None) -> list[Hit]:
    """Candidate hits with their items read in full, related objects attached: a statement per
    memory type, by primary key, in one round trip. An item deleted in between, or hidden from the
    reader since (its session's delete accepted), is left out."""
    ids_by_source: dict[SearchSource, list] = {}
    for hit in hits:
        ids_by_source.setdefault(hit.source, []).append(hit.instance.pk)
    statements = []
    for source, ids in ids_by_source.items():
        columns, joins, _ = row_layout(source)
        visible, params = visibility_sql(source, reader=reader, user_id=user_id)
        statements.append(
            (
                f"SELECT 0.0, NULL, {', '.join(columns)} FROM {source.table} t {joins}"
                f" WHERE t.id = ANY(%s) AND {visible}",
                [ids, *params],
            )
        )
    full = {}
    for source, rows in zip(ids_by_source, result_sets(statements, database=reader.database) if statements else []):
        for instance, _ in instances(source, rows, database=reader.database):
            full[source.memory_type, instance.pk] = instance
    return [
        Hit(source=hit.source, instance=full[hit.source.memory_type, hit.instance.pk], score=hit.score)
        for hit in hits
        if (hit.source.memory_type, hit.instance.pk) in full
    ]
