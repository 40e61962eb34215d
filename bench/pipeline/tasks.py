"""Pipeline benchmark: no-op tasks through ONE real Celery worker (solo pool) on a private Redis.

Measures throughput (tasks/s once the worker has a backlog: Celery delivery, claim, handler,
completion) and the latency from commit to handler start (p50/p95) when the queue is empty.
The worker subprocess imports this module (`--include bench.pipeline.tasks`) for its no-op handler.
`python -m bench pipeline`.
"""

import statistics
import time
import uuid
from pathlib import Path

from apps.pipeline.registry import register_handler
from bench.common import load_average, measured, percentile, write_result

NOOP = "bench_noop"
TARGET_TASKS_PER_SECOND = 1000
TARGET_P50_MS = 50


@register_handler(NOOP)
def noop(task) -> dict:
    return {"started_at": time.time()}


def _wait_until_finished(task_ids, *, timeout: float, interval: float) -> None:
    from apps.pipeline.models import MemoryTask

    deadline = time.monotonic() + timeout
    remaining = set(task_ids)
    while remaining:
        finished = MemoryTask.objects.filter(pk__in=remaining).exclude(
            status__in=[MemoryTask.Status.QUEUED, MemoryTask.Status.RUNNING]
        )
        remaining -= set(finished.values_list("pk", flat=True))
        if remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(remaining)} bench tasks did not finish within {timeout}s")
            time.sleep(interval)


def _latency_samples(organization, samples: int) -> list[float]:
    """One task at a time: commit, then wait until it ran; latency = handler start - commit."""
    from django.db import transaction

    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import enqueue

    latencies = []
    for index in range(samples):
        committed = {}
        with transaction.atomic():
            # Registered before enqueue's publish callback, so it runs first, right after COMMIT.
            transaction.on_commit(lambda: committed.setdefault("at", time.time()))
            task = enqueue(NOOP, {"sample": index}, organization=organization)
        _wait_until_finished([task.pk], timeout=30, interval=0.002)
        task = MemoryTask.objects.get(pk=task.pk)
        if task.status != MemoryTask.Status.SUCCEEDED:
            raise RuntimeError(f"bench task {task.pk} ended {task.status}: {task.error}")
        latencies.append((task.result["started_at"] - committed["at"]) * 1000)
    return latencies


def _throughput(organization, tasks: int) -> dict:
    """A batch committed at once: the worker drains a backlog; rates from the rows' timestamps."""
    from django.db import transaction
    from django.db.models import Max, Min

    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import enqueue

    marks = {}
    with transaction.atomic():
        transaction.on_commit(lambda: marks.setdefault("committed", time.time()))
        ids = [enqueue(NOOP, {"batch": index}, organization=organization).pk for index in range(tasks)]
        transaction.on_commit(lambda: marks.setdefault("published", time.time()))
    _wait_until_finished(ids, timeout=300, interval=0.05)
    rows = MemoryTask.objects.filter(pk__in=ids)
    span = rows.aggregate(first_claim=Min("claimed_at"), last_finish=Max("finished_at"))
    statuses = set(rows.values_list("status", flat=True))
    if statuses != {MemoryTask.Status.SUCCEEDED}:
        raise RuntimeError(f"bench batch ended with statuses {statuses}")
    worker_seconds = (span["last_finish"] - span["first_claim"]).total_seconds()
    end_to_end_seconds = span["last_finish"].timestamp() - marks["committed"]
    return {
        "tasks": tasks,
        "worker_tasks_per_s": round(tasks / worker_seconds, 1),
        "end_to_end_tasks_per_s": round(tasks / end_to_end_seconds, 1),
        "publish_tasks_per_s": round(tasks / (marks["published"] - marks["committed"]), 1),
        "worker_seconds": round(worker_seconds, 3),
        "end_to_end_seconds": round(end_to_end_seconds, 3),
    }


def run(output_dir, *, tasks: int = 2000, samples: int = 200, log=print) -> dict:
    """Runs the benchmark in this (Django) process with a private Redis and one worker subprocess."""
    from django.core.management import call_command
    from django.db import connection

    from apps.tenancy.models import Organization
    from harness.processes import CeleryWorker, RedisServer, celery_broker

    load_before = load_average()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    # Only the pipeline's tables (and what they depend on) are needed.
    call_command("migrate", "pipeline", interactive=False, verbosity=0)
    organization = Organization.objects.create(name=f"bench-pipeline-{uuid.uuid4().hex[:12]}")
    redis_server, worker = RedisServer(), None
    try:
        redis_server.start()
        with celery_broker(redis_server.url):
            worker = CeleryWorker(
                broker_url=redis_server.url,
                settings_dict=connection.settings_dict,
                log_path=output_dir / "pipeline-worker.log",
                include="bench.pipeline.tasks",
                pool="solo",
            ).start()
            log(f"pipeline: worker pid {worker.pid} (solo pool) on {redis_server.url}")
            _latency_samples(organization, 20)  # warm-up: connections, imports, caches
            latencies = _latency_samples(organization, samples)
            throughput = _throughput(organization, tasks)
    finally:
        if worker is not None:
            worker.stop()
        redis_server.stop()
        organization.delete()  # its tasks go with it

    p50, p95 = percentile(latencies, 0.50), percentile(latencies, 0.95)
    result = {
        "benchmark": "pipeline",
        "worker": "1 Celery worker, solo pool, prefetch 1, acks_late, log level INFO (as deployed)",
        "broker": "private redis-server (no persistence)",
        "throughput": throughput,
        "latency_commit_to_handler_start_ms": {
            "samples": samples,
            "p50": round(p50, 2),
            "p95": round(p95, 2),
            "mean": round(statistics.fmean(latencies), 2),
            "max": round(max(latencies), 2),
        },
        "targets": {"tasks_per_s": TARGET_TASKS_PER_SECOND, "p50_ms": TARGET_P50_MS},
        "meets_targets": throughput["worker_tasks_per_s"] >= TARGET_TASKS_PER_SECOND and p50 < TARGET_P50_MS,
        **measured(load_before=load_before),
    }
    write_result(output_dir, "pipeline", result)
    log(
        f"pipeline: {throughput['worker_tasks_per_s']} no-op tasks/s through one worker "
        f"({throughput['end_to_end_tasks_per_s']} tasks/s commit-to-last-finish for {tasks} tasks); "
        f"commit-to-start p50 {p50:.1f} ms, p95 {p95:.1f} ms ({samples} samples); "
        f"targets >= {TARGET_TASKS_PER_SECOND}/s and p50 < {TARGET_P50_MS} ms: "
        f"{'met' if result['meets_targets'] else 'NOT met'}"
    )
    return result
