"""Broker failover with Redis Sentinel: a worker (with beat) on a Sentinel URL, tasks enqueued
continuously, the Redis primary SIGKILLed; the Sentinels promote the replica, and every task runs,
exactly once (the rows are in PostgreSQL; beat re-publishes what the dead primary held)."""

import time
from collections import Counter

import pytest
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue
from harness.processes import CeleryWorker, SentinelGroup, celery_broker, wait_for
from tests.pipeline.fault_handlers import EFFECTS_TABLE, RUNS_TABLE, SLOW_SIDE_EFFECT, rows

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LOAD_BEFORE_SECONDS = 4
LOAD_AFTER_SECONDS = 12
ENQUEUE_EVERY_SECONDS = 0.1
RECOVERY_LIMIT_SECONDS = 30


@pytest.fixture
def sentinels(tmp_path):
    group = SentinelGroup(tmp_path).start()
    try:
        yield group
    finally:
        group.stop()


def test_killing_the_redis_primary_under_load_loses_no_task(sentinels, run_tables, organization, tmp_path, caplog):
    # Beat re-publishes rows older than a second, every second (the shipped defaults: 15 s and 15 s).
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(task="pipeline.republish_due_tasks").update(interval=every_second)
    worker = CeleryWorker(
        broker_url=sentinels.url,
        settings_dict=connection.settings_dict,
        log_path=tmp_path / "worker.log",
        include="tests.pipeline.fault_handlers",
        pool="prefork",
        concurrency=2,
        beat=True,
        env={"REDIS_SENTINEL_MASTER": sentinels.master_name, "TASK_REPUBLISH_AFTER_SECONDS": "1"},
    )
    try:
        with celery_broker(sentinels.url, master_name=sentinels.master_name):
            worker.start(timeout=60)
            first_primary = sentinels.primary_port()
            ids, sent_at, killed_at = [], {}, None
            started = time.monotonic()
            while time.monotonic() - started < LOAD_BEFORE_SECONDS + LOAD_AFTER_SECONDS:
                if killed_at is None and time.monotonic() - started >= LOAD_BEFORE_SECONDS:
                    assert sentinels.kill_primary() == first_primary
                    killed_at = time.monotonic()
                task_id = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 0}, organization=organization).pk
                ids.append(task_id)
                sent_at[task_id] = time.monotonic()
                time.sleep(ENQUEUE_EVERY_SECONDS)
            promoted = wait_for(
                lambda: (port := sentinels.primary_port()) != first_primary and port,
                timeout=30,
                message="the Sentinels to promote the replica",
            )

            tasks = MemoryTask.objects.filter(pk__in=ids)
            wait_for(
                lambda: not tasks.exclude(status=MemoryTask.Status.SUCCEEDED).exists(),
                timeout=90,
                interval=0.2,
                message="every task to succeed",
            )
            # The worker consumes from the new primary: a task published to it with the worker idle runs.
            probe = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 0}, organization=organization)
            probe_sent = time.monotonic()
            wait_for(
                lambda: MemoryTask.objects.filter(pk=probe.pk, status=MemoryTask.Status.SUCCEEDED).exists(),
                timeout=20,
                interval=0.1,
                message="a task sent after the failover to run",
            )
            probe_seconds = time.monotonic() - probe_sent
    finally:
        worker.kill()
        print(f"----- worker.log -----\n{worker.log()[-8000:]}")

    assert promoted != first_primary
    # Publishing went through the Sentinels' primary before the kill, failed while there was none, and
    # went to the promoted replica after: the publishes that gave up are the rows beat sent again.
    unpublished = {task_id for task_id in [*ids, probe.pk] if f"could not publish task {task_id} " in caplog.text}
    assert not [task_id for task_id in unpublished if sent_at.get(task_id, killed_at) < killed_at]
    assert probe.pk not in unpublished, "a publish after the failover reached the new primary"
    publish_outage = max((sent_at[task_id] for task_id in unpublished), default=killed_at) - killed_at
    # 0 lost, none twice.
    runs = Counter(task_id for (task_id,) in rows(f"SELECT task_id FROM {RUNS_TABLE}"))
    assert set(runs) == {*ids, probe.pk}
    assert set(runs.values()) == {1}, "a task ran more than once"
    assert rows(f"SELECT count(*) FROM {EFFECTS_TABLE}") == [(len(ids) + 1,)]
    # Recovery: the longest any task waited, from the kill on, is bounded.
    waits = [
        (task.finished_at - task.created_at).total_seconds()
        for task in MemoryTask.objects.filter(pk__in=ids).only("created_at", "finished_at")
    ]
    recovery = max(waits)
    print(
        f"{len(ids)} tasks, primary killed after {LOAD_BEFORE_SECONDS} s; {len(unpublished)} publishes gave up, "
        f"the last {publish_outage:.1f} s after the kill; longest wait of a task {recovery:.1f} s; a task sent "
        f"after the failover ran in {probe_seconds:.2f} s"
    )
    assert recovery < RECOVERY_LIMIT_SECONDS
    assert "Connection to broker lost" in worker.log(), "the kill did reach the worker"
