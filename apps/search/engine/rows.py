"""From SQL to hits: a type's ranking and result rows in one statement, several statements in one
round trip, and model instances built from the rows."""

import functools
import hashlib
import math
import re
import weakref
from typing import NamedTuple

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field
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
    """The statement answering a search of one memory type: rows of score, the items a scan read (or
    NULL) and the `row_layout` columns, best first."""
    ranking, params = ranking_sql(source, reader=reader, query=query, method=method, limit=limit, filters=filters)
    layout = row_layout(source, candidate_rows)
    sql = f"""
        WITH hits AS ({ranking})
        SELECT hits.score, hits.visible_rows, {", ".join(layout.columns)}
        FROM hits JOIN {source.table} t ON t.id = hits.id {layout.joins}
        ORDER BY hits.score DESC, t.{source.time_column} DESC, t.id
    """
    return sql, params


class RowGroup(NamedTuple):
    """One object's columns in a result row: the item's (relation None) or a select_related one's."""

    relation: str | None  # the item's field naming the related object
    model: type[Model]
    fields: list[Field]


class RowLayout(NamedTuple):
    columns: list[str]  # the select list, group after group
    joins: str
    groups: list[RowGroup]


class Loader(NamedTuple):
    """How one RowGroup's values become a model instance."""

    relation: Field | None  # the item's field to attach the object to; None: the item itself
    model: type[Model]
    attnames: list[str]
    converters: list[tuple[int, list]]  # (position in the group, the field's database converters)
    pk_index: int  # the position of the group's primary key


@functools.cache
def row_layout(source: SearchSource, candidate_rows: bool = False) -> RowLayout:
    """A result row: the item's columns but its vector and tsvector (costlier to parse than the search)
    and its select_related objects'. A candidate row holds only `candidate_fields`; `completed` reads
    the kept hits in full."""
    skipped = {source.embedding_column, source.search_vector_column}
    own = [f for f in source.model._meta.concrete_fields if f.column not in skipped]
    if candidate_rows and source.candidate_fields:
        wanted = {source.model._meta.pk.name, *source.candidate_fields}
        own = [f for f in own if f.name in wanted]
    aliased = [("t", RowGroup(relation=None, model=source.model, fields=own))]
    joins = []
    for number, name in enumerate(() if candidate_rows else source.select_related):
        field = source.model._meta.get_field(name)
        related = field.related_model
        alias = f"r{number}"
        # A lookup by key per row (the fence, OFFSET 0, keeps the planner from hashing the whole
        # related table for a few dozen rows, which costs more than the search on a small one).
        joins.append(
            f"LEFT JOIN LATERAL (SELECT * FROM {related._meta.db_table} {alias}"
            f" WHERE {alias}.{related._meta.pk.column} = t.{field.column} OFFSET 0) {alias} ON true"
        )
        aliased.append((alias, RowGroup(relation=name, model=related, fields=list(related._meta.concrete_fields))))
    return RowLayout(
        columns=[f"{alias}.{field.column}" for alias, group in aliased for field in group.fields],
        joins=" ".join(joins),
        groups=[group for _, group in aliased],
    )


@functools.cache
def _loaders(source: SearchSource, candidate_rows: bool = False) -> list[Loader]:
    """One Loader per `row_layout` group, in the row's order."""
    return [
        Loader(
            relation=None if group.relation is None else source.model._meta.get_field(group.relation),
            model=group.model,
            attnames=[f.attname for f in group.fields],
            converters=[
                (index, found) for index, f in enumerate(group.fields) if (found := f.get_db_converters(connection))
            ],
            pk_index=group.fields.index(group.model._meta.pk),
        )
        for group in row_layout(source, candidate_rows).groups
    ]


# The names of the statements prepared on each open connection (a psycopg connection, lent by the
# pool to one request at a time); None: unknown after a failed batch, so all are deallocated first.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLACEHOLDER = re.compile(r"%(%|s)")


@functools.lru_cache(maxsize=512)
def _prepare_sql(sql: str, types: tuple[str, ...]) -> tuple[str, str, str]:
    """A statement's name, its PREPARE and its text as a comment for the EXECUTE (so logs show what ran,
    without values). Parameters are typed as their values: inferred from context, `substring(text,
    $1)` would take a pattern where `substring(text, 16)` takes a position."""
    name = "search_" + hashlib.sha256(f"{types}|{sql}".encode()).hexdigest()[:24]
    numbers = iter(range(1, sql.count("%s") + 1))
    body = _PLACEHOLDER.sub(lambda match: "%" if match.group(1) == "%" else f"${next(numbers)}", sql)
    body = body.replace("%", "%%")
    return name, f"PREPARE {name} ({', '.join(types)}) AS {body}", f"/* {body} */"


def _types(params: list, transformer: Transformer) -> tuple[str, ...]:
    """Each value's type as client-side binding writes it (a string is `unknown`, as it was there)."""
    types = []
    for value in params:
        items = [item for item in value if item is not None] if isinstance(value, list | tuple) else None
        sample = items[0] if items else (None if items is not None else value)
        oid = 0 if sample is None else transformer.get_dumper(sample, PyFormat.TEXT).oid
        info = transformer.adapters.types.get(oid) if oid else None
        types.append("unknown" if info is None else f"{info.regtype}[]" if items is not None else info.regtype)
    return tuple(types)


def _as_prepared(statements: list[tuple[str, list]], raw_connection, transformer: Transformer) -> tuple[str, list, set]:
    """The batch sending `statements` as prepared statements run with their generic plan: planning took
    longer than running (1.0-1.4 ms against 0.7 ms for 50 candidates), and the plan shape (scan or
    indexes) is chosen by the engine, so one generic plan per statement serves every value."""
    known = _PREPARED.get(raw_connection)
    parts = ["DEALLOCATE ALL"] if known is None else []
    prepared, executes = set(known or ()), []
    for sql, params in statements:
        name, prepare, text = _prepare_sql(sql, _types(params, transformer))
        if name not in prepared:
            parts.append(prepare)
            prepared.add(name)
        arguments = f"({', '.join(['%s'] * len(params))})" if params else ""
        executes.append(f"EXECUTE {name}{arguments} {text}")
    parts += ["SET LOCAL plan_cache_mode = force_generic_plan", *executes]
    return ";\n".join(parts), [param for _, params in statements for param in params], prepared


def result_sets(statements: list[tuple[str, list]], *, database: str = DEFAULT_DB_ALIAS) -> list[list[tuple]]:
    """The rows of several statements in one round trip, prepared (`_as_prepared`; off with
    SEARCH_PREPARED_STATEMENTS=false, e.g. behind a transaction pooler). Timestamps go through
    psycopg's compiled loader, not Django's pure-Python one (3.6 ms against 0.5 for 50 rows)."""
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
    """Whether a batch's current result is rows, asked of the result (`description` builds columns)."""
    return cursor.pgresult is not None and cursor.pgresult.status == pq.ExecStatus.TUPLES_OK


_FROM_DB = Model.from_db.__func__


def _builder(model):
    """`model.from_db` without Model.__init__ (a fifth of a search's Python time for 60 rows) where
    nothing listens to its signals: values straight into __dict__, absent fields deferred."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model) or model.from_db.__func__ is not _FROM_DB:
        return model.from_db
    return functools.partial(_from_db, model)


def _from_db(model, database: str, attnames: list[str], values: list):
    instance = model.__new__(model)
    instance.__dict__.update(zip(attnames, values))
    state = instance._state = ModelState()
    state.adding = False
    state.db = database
    return instance


def instances(
    source: SearchSource, rows, candidate_rows: bool = False, *, database: str = DEFAULT_DB_ALIAS
) -> list[tuple]:
    """[(instance, score)] from `search_sql` rows, related objects attached (one shared by several items
    built once), belonging to `database` so lazy loads read there too."""
    loaders = _loaders(source, candidate_rows)
    builders = [_builder(loader.model) for loader in loaders]
    wrapper = connections[database]  # not the `connection` proxy, looked up on every use
    related = {}
    results = []
    for score, _visible_rows, *values in rows:
        if not math.isfinite(score):
            continue
        instance = None
        position = 0
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
    """Candidate hits with their items read in full, one round trip; an item deleted or hidden from the
    reader since (its session's delete accepted) is left out."""
    ids_by_source: dict[SearchSource, list] = {}
    for hit in hits:
        ids_by_source.setdefault(hit.source, []).append(hit.instance.pk)
    statements = []
    for source, ids in ids_by_source.items():
        layout = row_layout(source)
        visible, params = visibility_sql(source, reader=reader, user_id=user_id)
        sql = f"SELECT 0.0, NULL, {', '.join(layout.columns)} FROM {source.table} t {layout.joins}"
        statements.append((f"{sql} WHERE t.id = ANY(%s) AND {visible}", [ids, *params]))
    full = {}
    for source, rows in zip(ids_by_source, result_sets(statements, database=reader.database) if statements else []):
        for instance, _ in instances(source, rows, database=reader.database):
            full[source.memory_type, instance.pk] = instance
    return [
        Hit(source=hit.source, instance=full[hit.source.memory_type, hit.instance.pk], score=hit.score)
        for hit in hits
        if (hit.source.memory_type, hit.instance.pk) in full
    ]
