"""Faults with real processes: each test has its own redis-server and its own Celery worker
subprocesses on the test database, and kills or stops them on purpose."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.conversations.models import Message
from apps.core import schedules
from apps.pipeline.models import MemoryTask
from apps.pipeline.selectors import machinery_status
from apps.pipeline.services import enqueue, recover_stale_tasks
from apps.providers.embeddings import embedding_model_name
from harness.broker_pause import run_pause
from harness.processes import CeleryWorker, WebServer, wait_for
from tests.conftest import api_for
from tests.pipeline.fault_handlers import ALWAYS_RAISES, EFFECTS_TABLE, RUNS_TABLE, SLOW_SIDE_EFFECT, rows

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Fast heartbeats and retries in the workers, so a fault shows within seconds.
WORKER_ENV = {
    "TASK_HEARTBEAT_SECONDS": "0.2",
    "TASK_STALE_AFTER_SECONDS": "2",
    "TASK_RETRY_BASE_SECONDS": "0.2",
    "TASK_RETRY_MAX_SECONDS": "1",
}
STALE_AFTER_SECONDS = 2
REPUBLISH_AFTER_SECONDS = 1


@pytest.fixture
def workers(transactional_db, broker, tmp_path):
    """`workers("name")` starts a worker subprocess; every one is SIGKILLed at teardown."""
    started: list[CeleryWorker] = []

    def start(
        name: str, *, beat: bool = False, env: dict | None = None, pool: str = "solo", concurrency: int = 1
    ) -> CeleryWorker:
        worker = CeleryWorker(
            broker_url=broker.url,
            settings_dict=connection.settings_dict,
            log_path=tmp_path / f"{name}.log",
            include="tests.pipeline.fault_handlers",
            env={**WORKER_ENV, **(env or {})},
            beat=beat,
            pool=pool,
            concurrency=concurrency,
        )
        started.append(worker)
        return worker.start()

    yield start
    for worker in started:
        worker.kill()
    for worker in started:  # shown by pytest when the test failed
        print(f"----- {worker.log_path.name} -----\n{worker.log()}")


def wait_for_status(task: MemoryTask, *statuses: str, timeout: float = 20) -> MemoryTask:
    def reached():
        task.refresh_from_db()
        return task.status in statuses

    wait_for(reached, timeout=timeout, interval=0.1, message=f"task {task.pk} to become {statuses} (is {task.status})")
    return task


def test_a_worker_killed_mid_handler_is_recovered_and_the_effect_happens_once(
    workers, run_tables, organization, settings
):
    settings.TASK_STALE_AFTER_SECONDS = STALE_AFTER_SECONDS
    first = workers("first")
    # Outside a transaction the row commits at once and is published at once.
    task = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 120}, organization=organization, max_attempts=3)
    runs_sql = f"SELECT attempt, pid FROM {RUNS_TABLE} WHERE task_id = %s ORDER BY at"
    wait_for(lambda: rows(runs_sql, [str(task.pk)]), timeout=20, message="the handler to start")

    first.kill()

    task.refresh_from_db()
    assert task.status == MemoryTask.Status.RUNNING
    assert task.claimed_by.endswith(f":{first.pid}")
    second = workers("second")
    # The killed worker's message stays unacknowledged in Redis until the visibility timeout
    # (minutes); the beat job sees the silent heartbeat and requeues the row instead.
    wait_for(
        lambda: recover_stale_tasks()["requeued"],
        timeout=STALE_AFTER_SECONDS + 10,
        interval=0.2,
        message="stale-claim recovery to requeue the task",
    )
    wait_for_status(task, MemoryTask.Status.SUCCEEDED, MemoryTask.Status.DEAD)

    assert task.status == MemoryTask.Status.SUCCEEDED
    assert task.attempts == 2
    assert task.result == {"pid": second.pid, "attempt": 2}
    assert rows(runs_sql, [str(task.pk)]) == [(1, first.pid), (2, second.pid)], "the handler really ran twice"
    assert rows(f"SELECT count(*) FROM {EFFECTS_TABLE} WHERE task_id = %s", [str(task.pk)]) == [(1,)]


def test_a_second_worker_process_takes_urgent_work_but_no_second_compile_while_one_runs(
    workers, run_tables, organization
):
    """TASK_COMPILE_MAX_RUNNING=1 on a worker of two processes: while one runs a long compile-class
    task, the other leaves the next compile due (no attempt spent) and runs urgent work; the second
    compile runs once the first is done."""
    workers("pair", pool="prefork", concurrency=2, env={"TASK_COMPILE_MAX_RUNNING": "1"})
    runs_sql = f"SELECT at FROM {RUNS_TABLE} WHERE task_id = %s"
    first = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 15}, organization=organization)
    wait_for(lambda: rows(runs_sql, [str(first.pk)]), timeout=30, message="the first compile to start")

    second = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 0}, organization=organization)
    urgent = enqueue(
        SLOW_SIDE_EFFECT, {"first_attempt_sleep": 0}, organization=organization, priority=MemoryTask.Priority.URGENT
    )
    wait_for_status(urgent, MemoryTask.Status.SUCCEEDED)

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == MemoryTask.Status.RUNNING, "the urgent task ran beside the compile"
    assert (second.status, second.attempts) == (MemoryTask.Status.QUEUED, 0), "the second compile waits, unspent"
    wait_for_status(second, MemoryTask.Status.SUCCEEDED, timeout=60)
    first.refresh_from_db()
    assert rows(runs_sql, [str(second.pk)])[0][0] >= first.finished_at, "the compiles never overlapped"


def test_a_compile_whose_process_died_does_not_hold_the_cap(workers, run_tables, organization):
    """The cap counts only compiles with a fresh heartbeat: once a dead process's row is stale, the
    next compile runs, before stale-claim recovery has even requeued that row."""
    first = workers("first", env={"TASK_COMPILE_MAX_RUNNING": "1"})
    stuck = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 120}, organization=organization)
    wait_for(
        lambda: rows(f"SELECT 1 FROM {RUNS_TABLE} WHERE task_id = %s", [str(stuck.pk)]),
        timeout=20,
        message="the compile to start",
    )
    first.kill()
    wait_for(
        lambda: MemoryTask.objects.filter(
            pk=stuck.pk, heartbeat_at__lt=timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)
        ).exists(),
        timeout=STALE_AFTER_SECONDS + 10,
        interval=0.2,
        message="the dead process's heartbeat to go stale",
    )
    workers("second", env={"TASK_COMPILE_MAX_RUNNING": "1"})
    following = enqueue(SLOW_SIDE_EFFECT, {"first_attempt_sleep": 0}, organization=organization)

    wait_for_status(following, MemoryTask.Status.SUCCEEDED)
    stuck.refresh_from_db()
    assert stuck.status == MemoryTask.Status.RUNNING, "nothing recovered it: the cap let the compile pass"


def test_a_publish_lost_in_a_redis_outage_is_sent_again_by_beat_and_the_task_runs(workers, broker, client_a, settings):
    """A plain deploy: `migrate` (which made the test database), then `celery worker -B`. Redis
    dies during an add and comes back empty; beat's own schedule re-publishes the row. Nothing
    here calls the recovery function."""
    settings.EXTRACTION_DEBOUNCE_SECONDS = 0
    republish = PeriodicTask.objects.get(task="pipeline.republish_due_tasks")
    assert republish.enabled and republish.interval.every == schedules.SCHEDULES[republish.name][1]
    workers("worker", beat=True, env={"TASK_REPUBLISH_AFTER_SECONDS": str(REPUBLISH_AFTER_SECONDS)})
    broker.stop()

    response = api_for(client_a).post(
        "/api/v1/memory/add",
        {
            "user_id": "u1",
            "session_id": "outage",
            "messages": [
                {"role": "user", "content": "Please remember that I prefer window seats."},
                {"role": "assistant", "content": "Noted: window seats."},
            ],
        },
        format="json",
    )

    assert response.status_code == 202, response.content
    task_ids = response.json()["task_ids"]
    assert task_ids
    tasks = list(MemoryTask.objects.filter(pk__in=task_ids))
    assert [(task.status, task.attempts) for task in tasks] == [(MemoryTask.Status.QUEUED, 0)] * len(task_ids)

    broker.start()  # same port, empty: the publish made while it was down is lost for good
    assert broker.published() == []
    deadline = REPUBLISH_AFTER_SECONDS + 3 * republish.interval.every
    for task in tasks:
        wait_for_status(task, MemoryTask.Status.SUCCEEDED, MemoryTask.Status.DEAD, timeout=deadline)
        assert task.status == MemoryTask.Status.SUCCEEDED, task.error

    embedded = Message.objects.filter(session__session_id="outage", embedding_model=embedding_model_name())
    assert embedded.count() == 2
    # The beat and the worker announced themselves through the database, not the broker.
    machinery = machinery_status()
    assert machinery["beat"]["status"] == machinery["worker"]["status"] == "ok"


def test_a_handler_that_always_raises_ends_dead_and_shows_in_the_admin(workers, organization, admin_client):
    workers("worker")

    task = enqueue(ALWAYS_RAISES, {}, organization=organization, max_attempts=3)
    wait_for_status(task, MemoryTask.Status.DEAD)

    assert task.attempts == 3
    assert task.finished_at is not None
    assert task.error.startswith("RuntimeError: always fails (attempt 3 in pid")
    page = admin_client.get("/admin/pipeline/memorytask/", {"status__exact": "dead"}).content.decode()
    assert f"/admin/pipeline/memorytask/{task.pk}/change/" in page
    assert "RuntimeError: always fails (attempt 3" in page


PAUSE_SECONDS = 5


def test_a_paused_broker_does_not_freeze_the_api_and_every_task_runs_once_it_is_back(
    workers, broker, client_a, tmp_path
):
    """gunicorn (2 workers x 4 threads) under 8 adders and 4 searchers while the broker is paused
    with SIGSTOP: adds still answer 202 and searches keep their latency; once the broker is
    continued, beat re-publishes the rows whose publish gave up and every task runs."""
    republish = PeriodicTask.objects.get(task="pipeline.republish_due_tasks")
    workers("worker", beat=True, env={"TASK_REPUBLISH_AFTER_SECONDS": str(REPUBLISH_AFTER_SECONDS)})
    server = WebServer(
        broker_url=broker.url,
        settings_dict=connection.settings_dict,
        log_path=tmp_path / "web.log",
        env={"EXTRACTION_DEBOUNCE_SECONDS": "0", "LOG_LEVEL": "ERROR"},
    ).start()
    try:
        run = run_pause(
            server=server, redis_server=broker, api_key=client_a.raw_key, pause_seconds=PAUSE_SECONDS, pace=0.5
        )
    finally:
        server.stop()
    summary = run.summary()
    print(summary)

    assert summary["add_statuses"] == [202] and summary["search_statuses"] == [200]
    assert summary["adds_completed_during_pause"] >= 8, "adds keep being accepted while the broker hangs"
    assert summary["searches_completed_during_pause"] >= 8, "searches keep being answered"
    assert summary["search_p95_ms_started_during_pause"] < 1000
    assert summary["add_max_ms_started_during_pause"] < 2000

    # Nothing is lost: the rows whose publish gave up are still queued, beat sends them again.
    task_ids = run.task_ids()
    tasks = MemoryTask.objects.filter(pk__in=task_ids)
    assert tasks.count() == len(task_ids)
    wait_for(
        lambda: not tasks.exclude(status=MemoryTask.Status.SUCCEEDED).exists(),
        timeout=90 + REPUBLISH_AFTER_SECONDS + 3 * republish.interval.every,
        interval=0.5,
        message="every task of the run to succeed",
    )
