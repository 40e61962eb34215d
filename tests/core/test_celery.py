"""A real round trip: publish to the Redis at REDIS_URL, a real worker consumes and answers."""

import uuid

import pytest
from celery.contrib.testing.worker import start_worker

from apps.core.tasks import ping
from memory_platform.celery import app


# A worker checks the configuration and the migrations against the database before it consumes.
@pytest.mark.django_db
@pytest.mark.worker
def test_ping_round_trip_through_a_real_worker():
    token = uuid.uuid4().hex
    # The suite's Redis database holds the wake-ups earlier tests published with no worker to take
    # them; each costs a worker a claim or two, and the ping would wait behind all of them.
    app.control.purge()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        result = ping.delay(token)
        assert result.get(timeout=60) == f"pong:{token}"  # generous: a loaded machine starts workers slowly
