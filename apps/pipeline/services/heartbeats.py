"""Process heartbeats: which workers and beat processes are alive, for health checks and the dashboard."""

import logging
import os
import socket
import threading
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.pipeline.models import ProcessHeartbeat

logger = logging.getLogger(__name__)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def heartbeat_record(*, kind: str, hostname: str, started_at) -> None:
    now = timezone.now()
    ProcessHeartbeat.objects.bulk_create(
        [ProcessHeartbeat(kind=kind, hostname=hostname, pid=os.getpid(), started_at=started_at, seen_at=now)],
        update_conflicts=True,
        unique_fields=["kind", "hostname"],
        update_fields=["pid", "started_at", "seen_at"],
    )


def worker_heartbeats_start(*, hostname: str) -> threading.Thread:
    """From a daemon thread of the main process, whatever its pool is doing; an outage is never fatal."""
    started_at = timezone.now()

    def beat():
        while True:
            try:
                heartbeat_record(kind=ProcessHeartbeat.Kind.WORKER, hostname=hostname, started_at=started_at)
            except Exception as exc:
                logger.warning("could not record the worker heartbeat: %s", type(exc).__name__)
                connection.close()
            time.sleep(settings.TASK_HEARTBEAT_SECONDS)

    thread = threading.Thread(target=beat, daemon=True, name="worker-heartbeat")
    thread.start()
    return thread
