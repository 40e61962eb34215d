"""A hung broker under API load: gunicorn (2 workers x 4 threads, as `make run`) and one Celery
worker on a private redis-server, 8 callers adding turns and 4 searching (each waiting 0.1 s
between calls); the redis-server is paused with SIGSTOP for 10 s, then continued.

Reports the requests completed during the pause, search latency during it, the slowest add
started during it, and whether every task of the run succeeded afterwards (beat's re-publish
is called once, as its schedule would). `python -m bench broker_pause`.
"""

import tempfile
import time
import uuid
from pathlib import Path

from bench.common import machine, write_result

PAUSE_SECONDS = 10


def run(output_dir: Path) -> dict:
    from django.conf import settings
    from django.db import connection

    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import republish_due_tasks
    from apps.tenancy.services import client_create, organization_create
    from harness.broker_pause import run_pause
    from harness.processes import CeleryWorker, RedisServer, WebServer, celery_broker, wait_for

    organization = organization_create(name=f"bench-pause-{uuid.uuid4().hex[:8]}")
    client, api_key = client_create(organization=organization, name="bench", write_scope="bench")
    logs = Path(tempfile.mkdtemp(prefix="bench-pause-"))
    redis_server = RedisServer().start()
    worker = server = None
    try:
        worker = CeleryWorker(
            broker_url=redis_server.url, settings_dict=connection.settings_dict, log_path=logs / "worker.log"
        )
        worker.start()
        server = WebServer(
            broker_url=redis_server.url,
            settings_dict=connection.settings_dict,
            log_path=logs / "web.log",
            env={"LOG_LEVEL": "ERROR"},
        ).start()
        pause = run_pause(server=server, redis_server=redis_server, api_key=api_key, pause_seconds=PAUSE_SECONDS)
        server.stop()
        summary = pause.summary()
        task_ids = pause.task_ids()
        started = time.monotonic()
        settings.TASK_REPUBLISH_AFTER_SECONDS = 0
        with celery_broker(redis_server.url):
            republish_due_tasks()
        tasks = MemoryTask.objects.filter(pk__in=task_ids)
        wait_for(
            lambda: not tasks.exclude(status=MemoryTask.Status.SUCCEEDED).exists(),
            timeout=300,
            interval=0.5,
            message="every task of the run to succeed",
        )
        summary.update(
            tasks=len(task_ids),
            tasks_succeeded=tasks.filter(status=MemoryTask.Status.SUCCEEDED).count(),
            seconds_to_drain_after_resume=round(time.monotonic() - started, 1),
        )
    finally:
        if server is not None:
            server.stop()
        if worker is not None:
            worker.stop()
        redis_server.stop()
    result = {"benchmark": "broker_pause", "machine": machine(), **summary}
    print(
        f"broker pause {summary['pause_seconds']} s: {summary['completed_during_pause']} requests completed during it "
        f"({summary['adds_completed_during_pause']} adds, {summary['searches_completed_during_pause']} searches; "
        f"search p95 {summary['search_p95_ms_started_during_pause']} ms; slowest add started in it "
        f"{summary['add_max_ms_started_during_pause']} ms); {summary['tasks_succeeded']}/{summary['tasks']} tasks succeeded"
    )
    write_result(output_dir, "broker_pause", result)
    return result
