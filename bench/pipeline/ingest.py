"""Ingest benchmark: the 100 tau-bench trajectories through the HTTP API, next to the floor.

The API path is `POST /api/v1/memory/add` served by gunicorn (2 workers), one request per
trajectory, 4 concurrent callers; its broker is a private redis-server, so no worker runs
and nothing reaches the machine's shared Redis. The floor is the same rows written by a
plain psycopg `executemany` into the same table in the same run. Round-trip fidelity: every
message is read back from the transcript endpoint and compared (order, role, tool name,
tool calls).
"""

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from bench.common import Stopwatch, api_server, percentiles, write_result
from bench.data import load

CONCURRENCY = 4


def floor_rows(client, trajectories) -> tuple[str, list[tuple]]:
    """The floor's statement and rows: the same turns as plain tuples for one `executemany` (their
    sessions created here, beforehand)."""
    from apps.conversations.models import Message, Session
    from apps.conversations.turns import normalise_messages
    from apps.tenancy.services import end_user_get_or_create

    end_user = end_user_get_or_create(organization=client.organization, user_id="floor")
    rows = []
    now = datetime.now(timezone.utc)
    for number, trajectory in enumerate(trajectories):
        session = Session.objects.create(
            organization=client.organization,
            end_user=end_user,
            client=client,
            scope=client.write_scope,
            session_id=f"floor-{number}",
            session_tag="task",
        )
        turns = normalise_messages(trajectory["traj"], max_chars=32000, default_occurred_at=now)
        for seq, turn in enumerate(turns, start=1):
            rows.append(
                (
                    str(uuid.uuid4()),
                    now,
                    now,
                    client.organization_id,
                    end_user.pk,
                    client.write_scope,
                    session.pk,
                    seq,
                    turn.role,
                    turn.name,
                    turn.content,
                    json.dumps(turn.tool_calls) if turn.tool_calls else None,
                    turn.tool_call_id,
                    json.dumps(turn.metadata),
                    turn.truncated,
                    turn.occurred_at,
                    client.pk,
                    "",
                    "",
                )
            )
    table = Message._meta.db_table
    sql = (
        f"INSERT INTO {table} (id, created_at, updated_at, organization_id, end_user_id, scope, session_id, seq, role,"
        " name, content, tool_calls, tool_call_id, metadata, truncated, occurred_at, created_by_id, embedding_model,"
        " context) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    return sql, rows


def _floor(client, trajectories) -> tuple[float, int]:
    """Seconds to write the same turns with executemany (sessions created beforehand)."""
    from django.db import connection

    sql, rows = floor_rows(client, trajectories)
    with Stopwatch() as watch, connection.cursor() as cursor:
        cursor.executemany(sql, rows)
    return watch.seconds, len(rows)


def run(output_dir: Path) -> dict:
    import httpx

    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    trajectories = load("tau-airline-dev.json")
    organization = organization_create(name=f"bench-ingest-{uuid.uuid4().hex[:8]}")
    client, api_key = client_create(organization=organization, name="bench", write_scope="bench")
    try:
        with (
            api_server(workers=2, threads=2, env={"LOG_LEVEL": "WARNING"}) as server,
            httpx.Client(base_url=server.url, headers={"Authorization": f"Api-Key {api_key}"}, timeout=60) as http,
        ):

            def post(item):
                number, trajectory = item
                body = {
                    "user_id": "bench-user",
                    "session_id": f"tau-{number}",
                    "session_tag": "task",
                    "messages": trajectory["traj"],
                    "seal": True,
                    "outcome": "success" if trajectory["reward"] == 1.0 else "failure",
                }
                with Stopwatch() as watch:
                    response = http.post("/api/v1/memory/add", json=body)
                assert response.status_code == 202, response.text
                return watch.ms, response.json()["messages_stored"]

            with Stopwatch() as api, ThreadPoolExecutor(CONCURRENCY) as pool:
                outcomes = list(pool.map(post, enumerate(trajectories)))
            stored = sum(count for _, count in outcomes)

            intact = 0
            for number, trajectory in enumerate(trajectories):
                transcript = http.get(
                    f"/api/v1/sessions/tau-{number}/", params={"user_id": "bench-user", "limit": 1000}
                ).json()
                messages = transcript["messages"]
                assert len(messages) == len(trajectory["traj"]), (
                    f"tau-{number}: {len(messages)} of {len(trajectory['traj'])}"
                )
                for sent, got in zip(trajectory["traj"], messages):
                    assert got["role"] == sent["role"]
                    if sent["role"] == "tool":
                        assert got["name"] == sent["name"] and got["content"].startswith(f"[{sent['name']}] ")
                    if sent.get("tool_calls"):
                        assert [call["function"] for call in got["tool_calls"]] == [
                            call["function"] for call in sent["tool_calls"]
                        ]
                    intact += 1
        floor_seconds, floor_rows = _floor(client, trajectories)
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    latencies = percentiles([ms for ms, _ in outcomes], digits=1)
    api_rate = stored / api.seconds
    floor_rate = floor_rows / floor_seconds
    results = {
        "requests": len(outcomes),
        "messages": stored,
        "concurrency": CONCURRENCY,
        "api_messages_per_second": round(api_rate, 1),
        "api_request_p50_ms": latencies["p50"],
        "api_request_p95_ms": latencies["p95"],
        "floor_messages_per_second": round(floor_rate, 1),
        "api_share_of_floor": round(api_rate / floor_rate, 3),
        "target_share_of_floor": 0.25,
        "round_trip_intact_messages": intact,
    }
    print(
        f"ingest: {stored} messages in {len(outcomes)} requests: API {api_rate:.0f} msg/s "
        f"(p50 {results['api_request_p50_ms']} ms, p95 {results['api_request_p95_ms']} ms per trajectory), "
        f"floor {floor_rate:.0f} msg/s, API = {results['api_share_of_floor']:.0%} of the floor (target 25%); "
        f"round trip intact: {intact}/{stored}"
    )
    write_result(output_dir, "ingest", results)
    return results
