"""`python -m bench faults`: the operator's table of issue 25 on both deploy paths (runplatform, and
migrate + gunicorn + Celery worker + beat as separate processes), each on a private redis-server and
PostgreSQL, from a warmed-up worker, with callers adding and searching across every fault.

Reports, per path and row: processes alive after, tasks enqueued / succeeded / lost, client answers by
status (and the server errors by status and code), and the seconds from the fault's end to the first
task that succeeded after it. BENCH_FAULT_PATHS (default `runplatform,separate`) picks the paths.
"""

import os
import time
from pathlib import Path

from bench.common import deployed, machine, write_result


def _rows():
    from harness import fault_rows

    return [
        ("redis_kill_idle", lambda p: fault_rows.redis_kill(p, busy=False, down_seconds=3)),
        ("redis_kill_busy", lambda p: fault_rows.redis_kill(p, busy=True, down_seconds=3)),
        ("redis_flap", lambda p: fault_rows.redis_flap(p, kills=3, within_seconds=30)),
        ("redis_pause", lambda p: fault_rows.redis_pause(p, pause_seconds=30)),
        ("postgres_stop", lambda p: fault_rows.postgres_stop(p, down_seconds=10)),
        ("worker_kill", lambda p: fault_rows.worker_kill(p, in_flight=30, replace_after_seconds=10)),
        ("beat_kill", lambda p: fault_rows.beat_kill(p, down_seconds=10)),
    ]


def run(output_dir: Path) -> dict:
    from harness.fault_rows import Traffic, settle
    from harness.platforms import PATHS

    results = []
    for path in os.environ.get("BENCH_FAULT_PATHS", "runplatform,separate").split(","):
        with deployed(PATHS[path], name=f"faults-{path}") as platform_:
            since = time.time()
            with Traffic(platform_, adders=4, searchers=1, pace=0.1, tag="warm-up"):
                time.sleep(5)
            settle(platform_, since=since)
            for name, row in _rows():
                result = row(platform_).summary()
                result["name"] = name
                results.append(result)
                alive = sum(result["processes"].values())
                print(
                    f"{path:>18} | {result['row']:<55} | alive {alive}/{len(result['processes'])} | tasks "
                    f"{result['tasks_succeeded']}/{result['tasks_enqueued']} succeeded, {result['tasks_lost']} lost | "
                    f"server errors {result['server_errors'] or 'none'} | recovery {result['recovery_seconds']} s",
                    flush=True,
                )
    report = {"benchmark": "faults", "machine": machine(), "rows": results}
    write_result(output_dir, "faults", report)
    return report
