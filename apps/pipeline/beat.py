"""The beat scheduler: django-celery-beat's database scheduler, plus a heartbeat row written
from the scheduler loop itself, so a beat that stopped ticking shows in /readyz and the admin."""

import logging
import socket
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from apps.pipeline.models import ProcessHeartbeat
from apps.pipeline.services import heartbeat_record

logger = logging.getLogger(__name__)


class HeartbeatScheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        self._started_at = timezone.now()
        self._last_heartbeat = float("-inf")
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        interval = super().tick(*args, **kwargs)
        if time.monotonic() - self._last_heartbeat >= settings.TASK_HEARTBEAT_SECONDS:
            try:
                heartbeat_record(
                    kind=ProcessHeartbeat.Kind.BEAT, hostname=socket.gethostname(), started_at=self._started_at
                )
                self._last_heartbeat = time.monotonic()
            except Exception as exc:  # the schedule matters more than the record of it
                logger.warning("could not record the beat heartbeat: %s", type(exc).__name__)
                connection.close()
        return interval
