"""Every fault of the operator's table (issue 25), on both deploy paths, with real processes: a private
redis-server and PostgreSQL, the platform deployed by `runplatform` or as separate processes, a worker
that has already run tasks, and callers adding and searching across the fault. Short outages here;
`python -m bench faults` runs the same rows with the table's durations and reports them."""

import tempfile
import time
from pathlib import Path

import pytest

from harness import fault_rows
from harness.fault_rows import Traffic, settle
from harness.platforms import PATHS

pytestmark = pytest.mark.worker

RECOVERY_TARGET_SECONDS = 30


@pytest.fixture(scope="module", params=list(PATHS))
def platform(request):
    """One platform per deploy path, warmed up: its worker has run tasks before any fault."""
    deployed = PATHS[request.param](Path(tempfile.mkdtemp(prefix=f"faults-{request.param}-")))
    try:
        deployed.start()
        since = time.time()
        with Traffic(deployed, adders=4, searchers=1, pace=0.1, tag="warm-up"):
            time.sleep(4)
        created, succeeded = settle(deployed, since=since, timeout=120)
        assert created == succeeded > 20, "the worker has processed tasks before the faults"
        yield deployed
    except BaseException:
        print(deployed.logs_text())
        raise
    finally:
        deployed.stop()


def assert_survived(result, *, restarted: str | None = None, database_outage: bool = False):
    print(result.summary())
    assert all(result.processes.values()), f"a process is down after the fault: {result.processes}"
    restarts = result.notes.get("restarts")
    if restarts is not None:  # runplatform: its supervisor restarted the killed process, and nothing else
        assert {name: count for name, count in restarts.items() if name != restarted} == dict.fromkeys(
            [name for name in restarts if name != restarted], 0
        ), f"a process was restarted: {restarts}"
        if restarted:
            assert restarts[restarted] >= 1
    assert result.tasks_enqueued > 0
    assert result.tasks_lost == 0 and result.tasks_succeeded == result.tasks_enqueued
    assert result.turns_stored == result.turns_accepted, "every accepted turn is stored once"
    if database_outage:
        assert set(result.server_errors) <= {"503 service_unavailable retry-after 5"}, result.server_errors
    else:
        # One retryable 503 (which the SDK retries) has been seen once on a loaded 2-core machine, when
        # a database connection took longer than DATABASE_CONNECT_TIMEOUT_SECONDS; anything else fails.
        assert result.server_errors in ({}, {"503 service_unavailable retry-after 5": 1}), result.server_errors
    assert result.recovery_seconds is not None and result.recovery_seconds < RECOVERY_TARGET_SECONDS


def test_redis_killed_while_the_worker_is_idle(platform):
    assert_survived(fault_rows.redis_kill(platform, busy=False, down_seconds=1))


def test_redis_killed_while_the_worker_is_busy(platform):
    result = fault_rows.redis_kill(platform, busy=True, down_seconds=1)
    assert result.notes["backlog_at_fault"] > 0, "the worker had tasks in flight"
    assert_survived(result)


def test_redis_flapping(platform):
    assert_survived(fault_rows.redis_flap(platform, kills=3, within_seconds=9))


def test_redis_paused(platform):
    assert_survived(fault_rows.redis_pause(platform, pause_seconds=8))


def test_postgres_stopped_and_started(platform):
    # Longer than twice DATABASE_CONNECT_TIMEOUT_SECONDS (5): a call that began as the database went
    # away waits that long for a connection, so each traffic thread starts another inside the outage.
    result = fault_rows.postgres_stop(platform, down_seconds=12)
    assert result.notes["calls_during_outage"] > 0
    assert result.notes["slowest_call_during_outage_seconds"] < 10, "no request hangs on the outage"
    assert_survived(result, database_outage=True)


def test_worker_killed_with_tasks_in_flight(platform):
    result = fault_rows.worker_kill(platform, in_flight=30, replace_after_seconds=3)
    assert result.notes["backlog_at_fault"] > 0
    assert_survived(result, restarted="worker")


def test_beat_killed_and_restarted(platform):
    result = fault_rows.beat_kill(platform, down_seconds=2)
    assert result.notes["schedules_unchanged"], "no schedule lost or doubled"
    assert_survived(result, restarted="beat")
