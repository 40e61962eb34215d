"""The beat scheduler: django-celery-beat's, plus a heartbeat row written from its loop (a stopped beat shows
in /readyz) and a standing lock so one beat per database sends while any other stands by."""

import logging
import socket
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from apps.pipeline.locks import StandingLock
from apps.pipeline.models import ProcessHeartbeat
from apps.pipeline.services import heartbeat_record

logger = logging.getLogger(__name__)

# The advisory lock that makes one beat the sender of the periodic tasks.
BEAT_LOCK_KEY = "pipeline:beat"
# How often a standing-by beat tries the lock again: at most this long without a sender after the
# active beat's process (and so its database session) ends.
STANDBY_RETRY_SECONDS = 2.0


class HeartbeatScheduler(DatabaseScheduler):
    def __init__(self, *args, **kwargs):
        self._started_at = timezone.now()
        self._last_heartbeat = float("-inf")
        self._lock = StandingLock(BEAT_LOCK_KEY)
        self._active = self._standing_by = False
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        interval = (
            super().tick(*args, **kwargs) if self._holds_the_lock() else min(self.max_interval, STANDBY_RETRY_SECONDS)
        )
        self._record_heartbeat()
        return interval

    def _holds_the_lock(self) -> bool:
        if self._active and self._lock.held():
            return True
        if self._active:
            self._active = False
            logger.error("beat lost its database session and with it the beat lock; sending nothing until it is back")
        if self._lock.acquire():
            self._active, self._standing_by = True, False
            # Another beat may have run the schedules meanwhile: read their last runs from the database.
            self._initial_read, self._heap = True, None
            logger.info("beat holds the beat lock: this beat sends the periodic tasks")
            return True
        if not self._standing_by:
            self._standing_by = True
            logger.warning(
                "another beat holds the beat lock (or the database is unreachable): this beat sends nothing and "
                "stands by, trying again every %g s; it takes over when the other one stops",
                STANDBY_RETRY_SECONDS,
            )
        return False

    def _record_heartbeat(self) -> None:
        if time.monotonic() - self._last_heartbeat < settings.TASK_HEARTBEAT_SECONDS:
            return
        try:
            heartbeat_record(
                kind=ProcessHeartbeat.Kind.BEAT, hostname=socket.gethostname(), started_at=self._started_at
            )
            self._last_heartbeat = time.monotonic()
        except Exception as exc:  # the schedule matters more than the record of it
            logger.warning("could not record the beat heartbeat: %s", type(exc).__name__)
            connection.close()

    def close(self):
        super().close()
        self._lock.release()
