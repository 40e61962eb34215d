"""Ingest CPU: what one `POST memory/add` costs in CPU, in this process and in its PostgreSQL backend.

The 100 tau-bench trajectories go through the whole request path in process (Django's handler, the
middleware, DRF, the operation, the service), three rounds after ten warm-up adds, on a private
broker. Each round reads this process's CPU time and its database backend's (from /proc), so the
figure holds on a machine that is busy with other work, where the wall-clock rates of `ingest` do
not; the best round is reported (the least disturbed by others' cache and scheduling). The floor is
`ingest`'s: the same turns in one `executemany`, its CPU read the same way.
"""

import os
import time
import uuid
from pathlib import Path

from bench.common import private_broker, write_result
from bench.data import load
from bench.pipeline.ingest import floor_rows

ROUNDS = 3


def _backend_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process on this machine (the embedded PostgreSQL's backend)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(output_dir: Path) -> dict:
    from django.db import connection
    from rest_framework.test import APIClient

    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    trajectories = load("tau-airline-dev.json")
    organization = organization_create(name=f"bench-ingest-cpu-{uuid.uuid4().hex[:8]}")
    client, api_key = client_create(organization=organization, name="bench", write_scope="bench")
    api = APIClient(HTTP_HOST="127.0.0.1")
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key}")

    def add(number: int, trajectory: dict, prefix: str) -> None:
        body = {
            "user_id": "bench-user",
            "session_id": f"{prefix}-{number}",
            "session_tag": "task",
            "messages": trajectory["traj"],
            "seal": True,
            "outcome": "success" if trajectory["reward"] == 1.0 else "failure",
        }
        response = api.post("/api/v1/memory/add", body, format="json")
        assert response.status_code == 202, response.content

    rounds = []
    try:
        with private_broker():
            for number, trajectory in enumerate(trajectories[:10]):
                add(number, trajectory, "warm")
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend = cursor.fetchone()[0]
            for round_ in range(ROUNDS):
                python, database, wall = time.process_time(), _backend_cpu_seconds(backend), time.perf_counter()
                for number, trajectory in enumerate(trajectories):
                    add(number, trajectory, f"round{round_}")
                rounds.append(
                    {
                        "python_ms": (time.process_time() - python) * 1000 / len(trajectories),
                        "postgres_ms": (_backend_cpu_seconds(backend) - database) * 1000 / len(trajectories),
                        "wall_ms": (time.perf_counter() - wall) * 1000 / len(trajectories),
                    }
                )
            sql, rows = floor_rows(client, trajectories)
            python, database = time.process_time(), _backend_cpu_seconds(backend)
            with connection.cursor() as cursor:
                cursor.executemany(sql, rows)
            floor_ms = (time.process_time() - python + _backend_cpu_seconds(backend) - database) * 1000
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    best = min(rounds, key=lambda r: r["python_ms"] + r["postgres_ms"])
    turns = sum(len(trajectory["traj"]) for trajectory in trajectories)
    cpu_ms = best["python_ms"] + best["postgres_ms"]
    floor_ms_per_request = floor_ms / len(trajectories)
    results = {
        "requests_per_round": len(trajectories),
        "turns_per_request": round(turns / len(trajectories), 1),
        "cpu_ms_per_request": round(cpu_ms, 2),
        "python_cpu_ms_per_request": round(best["python_ms"], 2),
        "postgres_cpu_ms_per_request": round(best["postgres_ms"], 2),
        "wall_ms_per_request": round(best["wall_ms"], 2),
        "floor_cpu_ms_per_request": round(floor_ms_per_request, 2),
        "api_share_of_floor_by_cpu": round(floor_ms_per_request / cpu_ms, 3),
        "rounds": [{key: round(value, 2) for key, value in r.items()} for r in rounds],
    }
    print(
        f"ingest_cpu: {results['turns_per_request']} turns a request: {results['cpu_ms_per_request']} ms of CPU "
        f"({results['python_cpu_ms_per_request']} ms Python, {results['postgres_cpu_ms_per_request']} ms PostgreSQL); "
        f"wall {results['wall_ms_per_request']} ms; the floor's executemany {results['floor_cpu_ms_per_request']} ms: "
        f"the API is {results['api_share_of_floor_by_cpu']:.0%} of the floor by CPU"
    )
    write_result(output_dir, "ingest_cpu", results)
    return results
