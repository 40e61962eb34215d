"""The WHERE clause every ranking of a memory type shares: the owning app's visibility rule (the Q its
selectors filter by) compiled to SQL over `t`, then the caller's filters; names come from the models."""

import functools
import json
import uuid
from datetime import UTC, datetime, time, timedelta

from django.core.exceptions import EmptyResultSet, FullResultSet, ImproperlyConfigured
from django.db import connection
from django.db.models import Q
from django.db.models.sql import Query

from apps.search.engine.hits import TimeWindow
from apps.search.registry import SearchSource
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader


def where_sql(model, condition: Q, *, alias: str) -> tuple[str, list]:
    """A Q over `model` as (SQL, params) of a WHERE clause on its table aliased `alias`; it may not
    join (the SQL it is put in has no other table)."""
    query = Query(model)
    query.add_q(condition)
    base = query.get_initial_alias()
    joined = sorted(name for name, count in query.alias_refcount.items() if count and name != base)
    if joined:
        raise ImproperlyConfigured(f"A condition over {model.__name__} for SQL may not join {', '.join(joined)}.")
    query.change_aliases({base: alias})
    try:
        sql, params = query.get_compiler(connection=connection).compile(query.where)
    except EmptyResultSet:
        return "FALSE", []
    except FullResultSet:
        return "TRUE", []
    return sql, list(params)


# Building and compiling a Q costs about a millisecond, several per search; so each source's rule
# is compiled once per shape of reader (how many scopes, whether a user is named), with stand-ins
# for the reader's values, which `visibility_sql` then swaps for the real ones.
_TOKEN = uuid.uuid4()
_ORGANIZATION = _TOKEN
_USER = f"user-{_TOKEN}"


def _scope(number: int) -> str:
    return f"scope-{_TOKEN}-{number}"


def _stand_in(value) -> bool:
    return value == _ORGANIZATION or (isinstance(value, str) and str(_TOKEN) in value)


def _nested_stand_in(value) -> bool:
    return isinstance(value, list | tuple) and any(_stand_in(item) or _nested_stand_in(item) for item in value)


@functools.cache
def _visibility_template(source: SearchSource, scopes: int, user_named: bool) -> tuple[str, tuple]:
    reader = Reader(organization_id=_ORGANIZATION, read_scopes=tuple(_scope(n) for n in range(scopes)))
    condition = source.visible(reader, _USER if user_named else None) & source.served
    sql, params = where_sql(source.model, condition, alias="t")
    # A stand-in the compiler changed (a lookup wrapping it, a list holding it) would reach the
    # database instead of the reader's value: refuse such a rule rather than scope by the stand-in.
    expected = {_ORGANIZATION, *(_scope(n) for n in range(scopes)), *([_USER] if user_named else [])}
    for param in params:
        if _nested_stand_in(param) or (_stand_in(param) and param not in expected):
            raise ImproperlyConfigured(
                f"The visibility rule of {source.memory_type!r} transforms the reader's values; "
                "compare fields with them as they are."
            )
    return sql, tuple(params)


def visibility_sql(source: SearchSource, *, reader: Reader, user_id: str | None) -> tuple[str, list]:
    """What `reader` sees of the type and a search serves (`visible` and `served`), as SQL over `t`."""
    sql, params = _visibility_template(source, len(reader.read_scopes), user_id is not None)
    values = {_ORGANIZATION: reader.organization_id, _USER: user_id}
    values.update((_scope(n), scope) for n, scope in enumerate(reader.read_scopes))
    return sql, [values[param] if _stand_in(param) else param for param in params]


def _column(model, name: str) -> str:
    return model._meta.get_field(name).column


def filters_sql(source: SearchSource, *, reader: Reader, filters: dict) -> tuple[str, list]:
    """The WHERE clause every method shares: what the reader sees first, then the caller's filters."""
    clauses = [visibility_sql(source, reader=reader, user_id=filters.get("user_id"))]
    if filters.get("user_id") is not None and source.user_column:
        user = (
            f"t.{source.column(source.user_column)} = (SELECT e.{_column(EndUser, 'id')} FROM {EndUser._meta.db_table} e"
            f" WHERE e.{_column(EndUser, 'organization')} = %s AND e.{_column(EndUser, 'user_id')} = %s)"
        )
        clauses.append((user, [reader.organization_id, filters["user_id"]]))
    clauses.append(_session_sql(source, reader=reader, filters=filters))
    for name, operator in (("start", ">="), ("end", "<=")):
        if filters.get(name):
            clauses.append((f"t.{source.column(source.time_column)} {operator} %s", [filters[name]]))
    if filters.get("window"):
        clauses.append(window_sql(source, filters["window"]))
    clauses = [(sql, params) for sql, params in clauses if sql]
    return " AND ".join(sql for sql, _ in clauses), [param for _, params in clauses for param in params]


def _session_sql(source: SearchSource, *, reader: Reader, filters: dict) -> tuple[str, list]:
    """Items of the sessions the filters name (by id, tag, filter tags); the type's `visible` rule has
    already hidden those of sessions the reader does not see."""
    names = {"session_id": "= %s", "session_tag": "= %s", "filter_tags": "@> %s::jsonb"}
    wanted = {name: filters.get(name) for name in names if filters.get(name)}
    if not wanted:
        return "", []
    if source.session_column is None:
        return "FALSE", []  # the type has no session: nothing of it can match a session filter
    session = source.model._meta.get_field(source.session_column).related_model
    conditions = [f"s.{_column(session, name)} {names[name]}" for name in wanted]
    params = [json.dumps(value) if name == "filter_tags" else value for name, value in wanted.items()]
    sql = (
        f"t.{source.column(source.session_column)} IN (SELECT s.{session._meta.pk.column} FROM {session._meta.db_table} s"
        f" WHERE s.{_column(session, 'organization')} = %s AND {' AND '.join(conditions)})"
    )
    return sql, [reader.organization_id, *params]


def window_sql(source: SearchSource, window: TimeWindow) -> tuple[str, list]:
    """Items that happened within the window's days or whose words name a day in it."""
    conditions, params = [], []
    if source.event_time_column:
        column = source.column(source.event_time_column)
        first = datetime.combine(window.start, time.min, tzinfo=UTC)
        conditions.append(f"(t.{column} >= %s AND t.{column} < %s)")
        params += [first, first + timedelta(days=(window.end - window.start).days + 1)]
    if source.date_span_column:
        conditions.append(f"t.{source.column(source.date_span_column)} && daterange(%s, %s, '[]')")
        params += [window.start, window.end]
    return ("(" + " OR ".join(conditions) + ")" if conditions else ""), params
