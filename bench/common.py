"""What the benchmarks share: percentiles, timing, writing a result and the machine it was measured on,
running queued tasks in this process, and the servers and platforms a benchmark starts (real
processes, from harness/)."""

import json
import os
import platform
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from harness.measure import percentile

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentiles(values, *, digits: int = 2) -> dict:
    """{"p50": …, "p95": …} of `values`, rounded."""
    return {"p50": round(percentile(values, 0.5), digits), "p95": round(percentile(values, 0.95), digits)}


class Stopwatch:
    """The wall time of a block: `with Stopwatch() as watch: …`, then `watch.seconds` or `watch.ms`."""

    seconds = 0.0

    def __enter__(self) -> "Stopwatch":
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._started

    @property
    def ms(self) -> float:
        return self.seconds * 1000


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def machine(*, load_before: float | None = None) -> dict:
    """The machine a result was measured on. With `load_before` (`load_average()` at the start), its
    load then and now: other work on a shared machine slows a benchmark, the load says how busy it was."""
    figures = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    if load_before is not None:
        figures |= {"load_average_1m_before": load_before, "load_average_1m_after": load_average()}
    return figures


def measured_at() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def measured(*, load_before: float | None = None) -> dict:
    """The `machine` and `measured_at` fields of a result."""
    return {"machine": machine(load_before=load_before), "measured_at": measured_at()}


def write_json(path, result) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def write_result(output_dir, name: str, result) -> Path:
    """`<output_dir>/<name>.json` (bench/results/ from the command line); returns its path."""
    return write_json(Path(output_dir) / f"{name}.json", result)


def run_pending_tasks(organization, task_types=None) -> None:
    """Runs the organisation's queued tasks (of these types, or all) in this process, as a worker would."""
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.registry import queue_of
    from apps.pipeline.services import task_execute

    while True:
        queued = MemoryTask.objects.filter(organization=organization, status__in=MemoryTask.CLAIMABLE_STATUSES)
        if task_types is not None:
            queued = queued.filter(task_type__in=task_types)
        pending = list(queued.order_by("created_at").values_list("pk", "task_type"))  # in the order they were queued
        if not pending:
            return
        MemoryTask.objects.filter(pk__in=[task_id for task_id, _ in pending]).update(
            run_after=datetime.now(timezone.utc)
        )
        for task_id, task_type in pending:  # each as a worker of its type's queue would
            task_execute(task_id=task_id, worker="bench", lane=queue_of(task_type))


@contextmanager
def private_broker():
    """Celery publishes to a redis-server of the run's own for the block, so nothing of the run reaches
    a shared Redis; yields the server (harness.processes.RedisServer)."""
    from django.test.utils import override_settings

    from harness.processes import RedisServer, celery_broker

    server = RedisServer().start()
    try:
        with (
            celery_broker(server.url),
            override_settings(CELERY_BROKER_URL=server.url, CELERY_RESULT_BACKEND=server.url),
        ):
            yield server
    finally:
        server.stop()


@contextmanager
def api_server(**options):
    """gunicorn serving the API as `make run` does (gunicorn.conf.py; `options` as for
    harness.processes.WebServer) on this process's database and a private redis-server, both
    stopped afterwards; yields the server (its `url` and `port`)."""
    from harness.processes import web_on_private_redis

    with (
        tempfile.TemporaryDirectory(prefix="bench-api-") as logs,
        web_on_private_redis(Path(logs) / "web.log", **options) as (server, _),
    ):
        yield server


@contextmanager
def deployed(platform_class, *, name: str, **options):
    """A whole platform (harness.platforms: `RunPlatform`, `SeparateProcesses`) on a private
    PostgreSQL and redis-server in a directory of its own, started, and stopped afterwards; its logs are
    printed when the block fails."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-", ignore_cleanup_errors=True) as work_dir:
        platform_ = platform_class(Path(work_dir), **options)
        try:
            platform_.start()
            yield platform_
        except BaseException:
            print(platform_.logs_text())
            raise
        finally:
            platform_.stop()
