"""The WHERE clause every ranking of a memory type shares: the caller's organisation and read
scopes first, then the caller's filters (user, session, time, the question's time window)."""

import json
from datetime import UTC, datetime, time, timedelta

from apps.search.engine.hits import TimeWindow
from apps.search.registry import SearchSource
from apps.tenancy.readers import Reader


def filters_sql(source: SearchSource, *, reader: Reader, filters: dict) -> tuple[str, list]:
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
        clause, window_params = window_sql(source, window)
        if clause:
            clauses.append(clause)
            params += window_params
    if source.extra_where:
        clauses.append(f"({source.extra_where})")
    return " AND ".join(clauses), params


def window_sql(source: SearchSource, window: TimeWindow) -> tuple[str, list]:
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
