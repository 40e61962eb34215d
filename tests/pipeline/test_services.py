"""The pipeline's services against the real database and a private Redis: outbox publishing,
idempotency keys, claims, retries and dead letters, recovery, re-publishing, pruning, locks,
the task endpoint and the admin."""

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.pipeline.locks import LockNotAvailable, advisory_lock, advisory_xact_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import NotYet
from apps.pipeline.services import (
    enqueue,
    prune_finished_tasks,
    recover_stale_tasks,
    republish_due_tasks,
    task_execute,
    task_mark_dead,
    tasks_drain,
)
from apps.pipeline.services.execution import (
    BATCH_HOLD_SECONDS,
    COMPILE_CAP_LOCK,
    retry_delay,
    task_claim,
    tasks_claim_due,
)
from harness.processes import wait_for
from tests.conftest import api_for
from tests.factories import OrganizationFactory

RUN_TASK = "pipeline.run_memory_task"


@pytest.fixture(autouse=True)
def _private_broker(broker):
    """Every publish of this module goes to a private Redis, never to the shared one."""


def published_ids(broker) -> list[str | None]:
    """The task id of each message (None: a message that only drains the due queue)."""
    return [(message["args"] or [None])[0] for message in broker.published() if message["task"] == RUN_TASK]


def due_task(organization, **fields) -> MemoryTask:
    """A stored row, due a minute ago unless told otherwise."""
    fields.setdefault("task_type", "test_noop")
    fields.setdefault("run_after", timezone.now() - timedelta(minutes=1))
    return MemoryTask.objects.create(organization=organization, **fields)


# Enqueue: the row is the outbox.


@pytest.mark.django_db
def test_enqueue_publishes_only_after_commit(organization, broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            task = enqueue("test_noop", {"n": 1}, organization=organization)
        assert MemoryTask.objects.get(pk=task.pk).status == MemoryTask.Status.QUEUED
        assert published_ids(broker) == []
    assert len(callbacks) == 1
    assert published_ids(broker) == [str(task.pk)]


@pytest.mark.django_db(transaction=True)
def test_a_transaction_waits_for_a_failing_broker_once_and_its_rows_wait_for_beat(
    organization, broker, caplog, settings
):
    broker.stop()
    with caplog.at_level("INFO", logger="apps.pipeline.services"):
        with transaction.atomic():
            tasks = [enqueue("test_noop", {"n": n}, organization=organization) for n in range(3)]
        with transaction.atomic():
            later = enqueue("test_noop", {"n": 3}, organization=organization)
    messages = [record.getMessage() for record in caplog.records]
    attempts = [message for message in messages if message.startswith("could not publish task")]
    skipped = [message for message in messages if "not published (the broker just failed)" in message]
    assert attempts == [
        f"could not publish task {tasks[0].pk} (OperationalError); it stays queued for re-publishing",
        f"could not publish task {later.pk} (OperationalError); it stays queued for re-publishing",
    ], "each transaction tries the broker once"
    assert len(skipped) == 2
    assert MemoryTask.objects.filter(status=MemoryTask.Status.QUEUED).count() == 4

    broker.start()
    settings.TASK_REPUBLISH_AFTER_SECONDS = 0
    assert republish_due_tasks() == 4
    assert sorted(published_ids(broker)) == sorted(str(task.pk) for task in [*tasks, later])


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_publishes_nothing_and_stores_nothing(organization, broker):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            task = enqueue("test_noop", {"n": 1}, organization=organization, idempotency_key="rolled-back")
            raise RuntimeError("the caller fails after enqueueing")
    assert not MemoryTask.objects.filter(pk=task.pk).exists()
    assert published_ids(broker) == []

    # The key was never taken: a later enqueue stores and publishes a task of its own.
    with transaction.atomic():
        again = enqueue("test_noop", {"n": 1}, organization=organization, idempotency_key="rolled-back")
    assert again.pk != task.pk
    assert published_ids(broker) == [str(again.pk)]


@pytest.mark.django_db
def test_one_key_twice_in_one_transaction_is_one_task(organization, broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            first = enqueue("test_noop", {"n": 1}, organization=organization, idempotency_key="k1")
            second = enqueue("test_noop", {"n": 2}, organization=organization, idempotency_key="k1")
    assert second.pk == first.pk
    assert MemoryTask.objects.filter(idempotency_key="k1").count() == 1
    assert len(callbacks) == 1
    assert published_ids(broker) == [str(first.pk)]


@pytest.mark.django_db
def test_the_same_key_under_another_task_type_is_another_task(organization):
    first = enqueue("test_noop", {}, organization=organization, idempotency_key="k1")
    other = enqueue("test_other", {}, organization=organization, idempotency_key="k1")
    assert other.pk != first.pk


@pytest.mark.django_db
def test_a_failed_insert_without_a_key_raises_instead_of_returning_another_task(organization):
    unrelated = enqueue("test_noop", {}, organization=organization)
    with pytest.raises(IntegrityError), transaction.atomic():  # enqueue takes no savepoint: the caller's
        enqueue("test_noop", {}, organization=organization, max_attempts=-1)
    assert MemoryTask.objects.get() == unrelated


@pytest.mark.django_db(transaction=True)
def test_one_key_across_two_transactions_is_one_task_while_active(organization, broker):
    with transaction.atomic():
        first = enqueue("test_noop", {}, organization=organization, idempotency_key="k2")
    with transaction.atomic():
        second = enqueue("test_noop", {}, organization=organization, idempotency_key="k2")
    assert second.pk == first.pk
    assert MemoryTask.objects.filter(idempotency_key="k2").count() == 1
    assert published_ids(broker) == [str(first.pk)]

    # The key is unique among active rows only: once the task finished, the key is free again.
    MemoryTask.objects.filter(pk=first.pk).update(status=MemoryTask.Status.SUCCEEDED)
    with transaction.atomic():
        third = enqueue("test_noop", {}, organization=organization, idempotency_key="k2")
    assert third.pk != first.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_transactions_enqueueing_one_key_store_one_task(organization, broker):
    """The second transaction cannot see the first one's row; the unique index makes it wait and
    then hand back the committed task instead of storing a duplicate."""
    first_inserted, second_waits = threading.Event(), threading.Event()
    second_pid, results, errors = [], {}, []

    def first():
        try:
            with transaction.atomic():
                results["first"] = enqueue(
                    "test_noop", {"by": "first"}, organization=organization, idempotency_key="k3"
                )
                first_inserted.set()
                assert second_waits.wait(15), "the second transaction never waited on the first"
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def second():
        try:
            assert first_inserted.wait(15)
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    second_pid.append(cursor.fetchone()[0])
                results["second"] = enqueue(
                    "test_noop", {"by": "second"}, organization=organization, idempotency_key="k3"
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: second_pid, timeout=15, message="the second transaction")

        def second_is_waiting_on_a_lock():
            with connection.cursor() as cursor:
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [second_pid[0]])
                row = cursor.fetchone()
            return row is not None and row[0] == "Lock"

        wait_for(second_is_waiting_on_a_lock, timeout=15, message="the second INSERT to wait on the first")
    finally:
        second_waits.set()
        for thread in threads:
            thread.join(20)
    assert not errors, errors
    assert results["first"].pk == results["second"].pk
    assert MemoryTask.objects.filter(idempotency_key="k3").count() == 1
    assert MemoryTask.objects.get(idempotency_key="k3").payload == {"by": "first"}
    assert published_ids(broker) == [str(results["first"].pk)]


# Claim.


@pytest.mark.django_db
@pytest.mark.parametrize("status", [MemoryTask.Status.QUEUED, MemoryTask.Status.FAILED])
def test_claim_takes_a_due_queued_or_failed_row_once(organization, status):
    task = due_task(organization, status=status, attempts=1 if status == MemoryTask.Status.FAILED else 0)

    claimed = task_claim(task_id=task.pk, worker="host:1")

    assert claimed.pk == task.pk
    assert claimed.status == MemoryTask.Status.RUNNING
    assert claimed.attempts == task.attempts + 1
    assert claimed.claimed_by == "host:1"
    assert claimed.heartbeat_at is not None
    assert task_claim(task_id=task.pk, worker="host:2") is None
    task.refresh_from_db()
    assert (task.status, task.claimed_by) == (MemoryTask.Status.RUNNING, "host:1")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status",
    [MemoryTask.Status.RUNNING, MemoryTask.Status.SUCCEEDED, MemoryTask.Status.DEAD, MemoryTask.Status.CANCELLED],
)
def test_claim_leaves_rows_that_are_not_claimable(organization, status):
    task = due_task(organization, status=status)
    assert task_claim(task_id=task.pk, worker="host:1") is None
    task.refresh_from_db()
    assert task.status == status and task.attempts == 0


@pytest.mark.django_db
def test_claim_leaves_a_row_that_is_not_due_yet(organization):
    task = due_task(organization, run_after=timezone.now() + timedelta(minutes=5))
    assert task_claim(task_id=task.pk, worker="host:1") is None
    assert task_claim(task_id=uuid.uuid4(), worker="host:1") is None


# The compile cap: at most TASK_COMPILE_MAX_RUNNING processes run compile-class work at once.


def running_task(organization, *, worker: str, priority: int, heartbeat_age: float = 0) -> MemoryTask:
    """A row another process claimed and runs, its heartbeat `heartbeat_age` seconds old."""
    beat = timezone.now() - timedelta(seconds=heartbeat_age)
    return due_task(
        organization,
        status=MemoryTask.Status.RUNNING,
        attempts=1,
        claimed_by=worker,
        claimed_at=beat,
        heartbeat_at=beat,
        priority=priority,
    )


def due_by_priority(organization) -> dict[str, MemoryTask]:
    Priority = MemoryTask.Priority
    return {
        name: due_task(organization, priority=priority, run_after=timezone.now() - timedelta(minutes=minutes_ago))
        for name, priority, minutes_ago in [
            ("urgent", Priority.URGENT, 1),
            ("learn", Priority.LEARN, 2),
            ("compile", Priority.COMPILE, 3),
            ("maintenance", Priority.MAINTENANCE, 4),
        ]
    }


@pytest.mark.django_db
def test_at_the_compile_cap_a_claim_takes_only_more_urgent_work_and_leaves_compiles_due(organization, settings):
    settings.TASK_COMPILE_MAX_RUNNING = 1
    running_task(organization, worker="other:1", priority=MemoryTask.Priority.COMPILE)
    due = due_by_priority(organization)

    assert task_claim(task_id=due["compile"].pk, worker="host:1") is None
    claimed = tasks_claim_due(worker="host:1", limit=10)

    assert [task.pk for task in claimed] == [due["urgent"].pk, due["learn"].pk]
    for name in ("compile", "maintenance"):
        due[name].refresh_from_db()
        assert (due[name].status, due[name].attempts) == (MemoryTask.Status.QUEUED, 0), f"{name} waits, unspent"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cap", "others", "compiles_claimed"),
    [
        (1, [("host:1", MemoryTask.Priority.COMPILE, 0)], True),  # this process's own compile does not count
        (1, [("other:1", MemoryTask.Priority.URGENT, 0), ("other:2", MemoryTask.Priority.LEARN, 0)], True),
        (1, [("other:1", MemoryTask.Priority.MAINTENANCE, 0)], False),  # maintenance is compile class
        (1, [("gone:1", MemoryTask.Priority.COMPILE, 61)], True),  # its process died: heartbeat stale
        (2, [("other:1", MemoryTask.Priority.COMPILE, 0), ("other:1", MemoryTask.Priority.COMPILE, 0)], True),
        (2, [("other:1", MemoryTask.Priority.COMPILE, 0), ("other:2", MemoryTask.Priority.COMPILE, 0)], False),
        (0, [("other:1", MemoryTask.Priority.COMPILE, 0), ("other:2", MemoryTask.Priority.COMPILE, 0)], True),
    ],
)
def test_the_compile_cap_counts_other_processes_running_compile_class_work_with_a_fresh_heartbeat(
    organization, settings, cap, others, compiles_claimed
):
    settings.TASK_COMPILE_MAX_RUNNING, settings.TASK_STALE_AFTER_SECONDS = cap, 60
    for worker, priority, heartbeat_age in others:
        running_task(organization, worker=worker, priority=priority, heartbeat_age=heartbeat_age)
    due = due_by_priority(organization)

    claimed = {task.pk for task in tasks_claim_due(worker="host:1", limit=10)}

    expected = {"urgent", "learn", *(("compile", "maintenance") if compiles_claimed else ())}
    assert claimed == {due[name].pk for name in expected}


@pytest.mark.django_db(transaction=True)
def test_compiles_held_back_by_the_cap_run_once_the_compiling_process_is_done(organization, handlers, settings):
    """Nothing is lost and nothing starves: with only compiles due, a process at the cap claims none;
    when the other process's compile ends, the compiles all run, each on its first attempt."""
    settings.TASK_COMPILE_MAX_RUNNING = 1
    handlers("test_record", lambda task: {})
    other = running_task(organization, worker="other:1", priority=MemoryTask.Priority.COMPILE)
    compiles = [due_task(organization, task_type="test_record", priority=MemoryTask.Priority.COMPILE) for _ in range(3)]

    assert tasks_drain(worker="host:1") == {}
    assert set(MemoryTask.objects.filter(pk__in=[t.pk for t in compiles]).values_list("status", "attempts")) == {
        (MemoryTask.Status.QUEUED, 0)
    }

    MemoryTask.objects.filter(pk=other.pk).update(status=MemoryTask.Status.SUCCEEDED, finished_at=timezone.now())
    assert tasks_drain(worker="host:1") == {"succeeded": 3}
    assert set(MemoryTask.objects.filter(pk__in=[t.pk for t in compiles]).values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db(transaction=True)
def test_two_processes_claiming_at_once_cannot_both_pass_the_compile_cap(organization, settings):
    """Both claims wait for the cap's lock; the second one to get it sees the first one's compile."""
    settings.TASK_COMPILE_MAX_RUNNING = 1
    compiles = {due_task(organization, priority=MemoryTask.Priority.COMPILE).pk for _ in range(2)}
    claimed, errors = {}, []

    def claim(worker):
        try:
            claimed[worker] = tasks_claim_due(worker=worker, limit=1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(f"host:{n}",)) for n in (1, 2)]
    with transaction.atomic():
        advisory_xact_lock(COMPILE_CAP_LOCK)
        for thread in threads:
            thread.start()

        def both_wait_for_the_lock():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                )
                return cursor.fetchone()[0] == 2

        wait_for(both_wait_for_the_lock, timeout=15, message="both claims to wait for the cap's lock")
    for thread in threads:
        thread.join(20)
    assert not errors, errors
    assert sorted(len(tasks) for tasks in claimed.values()) == [0, 1]
    assert MemoryTask.objects.filter(pk__in=compiles, status=MemoryTask.Status.RUNNING).count() == 1


# Execution, retries and dead letters.


@pytest.mark.django_db
def test_execute_runs_the_handler_and_stores_its_result(organization, handlers):
    handlers("test_echo", lambda task: {"echo": task.payload["n"], "attempt": task.attempts})
    task = due_task(organization, task_type="test_echo", payload={"n": 7})

    assert task_execute(task_id=task.pk, worker="host:1") == "succeeded"

    task.refresh_from_db()
    assert task.status == MemoryTask.Status.SUCCEEDED
    assert task.result == {"echo": 7, "attempt": 1}
    assert task.finished_at is not None and task.error == ""
    assert task_execute(task_id=task.pk, worker="host:1") == "not-claimed"


@pytest.mark.django_db
def test_execute_records_where_the_time_went(organization, handlers, settings):
    from apps.providers.embeddings import embed_texts

    settings.EMBEDDING_PROVIDER = "hash"
    handlers("test_embeds", lambda task: {"vectors": len(embed_texts(["a turn", "another"]))})
    task = due_task(organization, task_type="test_embeds")

    assert task_execute(task_id=task.pk, worker="host:1") == "succeeded"

    task.refresh_from_db()
    timings = task.timings
    assert parse_datetime(timings["first_due_at"]) == task.run_after
    assert parse_datetime(timings["first_claimed_at"]) == task.claimed_at
    assert timings["handler_s"] >= timings["embedding_s"] > 0
    assert timings["sql_s"] >= 0 and "failed_s" not in timings


# Draining: one message runs every due task, most urgent first.


@pytest.mark.django_db(transaction=True)
def test_a_drain_runs_every_due_task_most_urgent_first(organization, handlers):
    ran = []
    handlers("test_record", lambda task: ran.append(task.payload["name"]) or {})
    Priority = MemoryTask.Priority
    for name, priority, minutes_ago in [
        ("lint", Priority.MAINTENANCE, 5),
        ("profile", Priority.COMPILE, 4),
        ("turns", Priority.URGENT, 1),
        ("memories", Priority.LEARN, 3),
        ("skill", Priority.URGENT, 2),
    ]:
        due_task(
            organization,
            task_type="test_record",
            payload={"name": name},
            priority=priority,
            run_after=timezone.now() - timedelta(minutes=minutes_ago),
        )
    later = due_task(
        organization, task_type="test_record", payload={"name": "later"}, run_after=timezone.now() + timedelta(hours=1)
    )

    assert tasks_drain(worker="host:1") == {"succeeded": 5}

    assert ran == ["skill", "turns", "memories", "profile", "lint"], "priority first, then due time"
    later.refresh_from_db()
    assert later.status == MemoryTask.Status.QUEUED, "a task that is not due waits for its time"
    assert tasks_drain(worker="host:1", first_task_id=later.pk) == {"not-claimed": 1}


@pytest.mark.django_db(transaction=True)
def test_a_slow_task_gives_the_rest_of_its_batch_back_to_the_queue(organization, handlers):
    """Quick tasks are claimed in growing batches; once one is slow, the tasks its batch holds and has
    not started go back to the queue (another worker may take them), with no attempt spent."""
    queued_when_started = {}

    def record(task):
        if task.payload["n"] == 3:
            time.sleep(BATCH_HOLD_SECONDS + 0.1)
        queued_when_started[task.payload["n"]] = MemoryTask.objects.filter(status=MemoryTask.Status.QUEUED).count()
        return {}

    handlers("test_record", record)
    for n in range(8):
        due_task(
            organization,
            task_type="test_record",
            payload={"n": n},
            run_after=timezone.now() - timedelta(seconds=60 - n),
        )

    assert tasks_drain(worker="host:1") == {"succeeded": 8}

    # Batches of 1, 2 and 4: task 3 opens the third batch (3-6) and is slow; 4, 5 and 6 go back.
    assert queued_when_started[3] == 1, "while task 3 ran, its batch held 4, 5 and 6; only 7 was queued"
    assert queued_when_started[4] == 3, "after task 3, the batch's unstarted tasks were back in the queue"
    assert set(MemoryTask.objects.values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db
def test_a_task_that_cannot_work_yet_waits_without_spending_an_attempt(organization, handlers, broker):
    def not_yet(task):
        raise NotYet("its input is still being written", retry_in=30)

    handlers("test_not_yet", not_yet)
    task = due_task(organization, task_type="test_not_yet", attempts=2)

    assert task_execute(task_id=task.pk, worker="host:1") == "deferred"

    task.refresh_from_db()
    assert (task.status, task.attempts, task.error) == (MemoryTask.Status.QUEUED, 2, "")
    assert 25 < (task.run_after - timezone.now()).total_seconds() <= 30
    assert task.timings["deferred"] == 1
    assert published_ids(broker) == [str(task.pk)]


@pytest.mark.django_db(transaction=True)
def test_a_task_whose_lock_another_session_holds_waits_instead_of_failing(organization, handlers, settings):
    settings.TASK_NOT_YET_SECONDS = 5

    def locked(task):
        with advisory_lock("test:owner", wait=False):
            return {"ran": True}

    handlers("test_locked", locked)
    task = due_task(organization, task_type="test_locked")
    holder_ready, release = threading.Event(), threading.Event()

    def hold():
        with advisory_lock("test:owner"):
            holder_ready.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holder_ready.wait(10)
        assert task_execute(task_id=task.pk, worker="host:1") == "deferred"
    finally:
        release.set()
        holder.join()

    task.refresh_from_db()
    assert (task.status, task.attempts, task.error) == (MemoryTask.Status.QUEUED, 0, "")
    assert task.run_after > timezone.now() + timedelta(seconds=3)


def test_a_task_without_a_handler_fails_with_a_clear_error(organization):
    task = due_task(organization, task_type="test_unregistered")
    assert task_execute(task_id=task.pk, worker="host:1") == "failed"
    task.refresh_from_db()
    assert task.error.startswith("LookupError: No handler is registered for task type 'test_unregistered'")


def test_backoff_grows_with_attempts_and_is_capped(settings):
    settings.TASK_RETRY_BASE_SECONDS = 2.0
    settings.TASK_RETRY_MAX_SECONDS = 30.0
    for attempts, ceiling in [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 30.0), (40, 30.0)]:
        delays = [retry_delay(attempts) for _ in range(200)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays), (attempts, min(delays), max(delays))
        assert len(set(delays)) > 1, "jitter spreads retries of tasks that failed together"


@pytest.mark.django_db
def test_a_raising_handler_is_retried_with_backoff_then_dead_with_its_last_error(
    organization, handlers, broker, settings
):
    settings.TASK_RETRY_BASE_SECONDS = 10.0
    settings.TASK_RETRY_MAX_SECONDS = 25.0

    def fails(task):
        raise ValueError(f"boom on attempt {task.attempts}")

    handlers("test_fails", fails)
    task = due_task(organization, task_type="test_fails", max_attempts=3)

    # Bounds of each retry's delay: attempt 1 -> [5, 10] s, attempt 2 -> [10, 20] s, capped at 25 s.
    for attempt, (low, high) in enumerate([(5.0, 10.0), (10.0, 20.0)], start=1):
        before = timezone.now()
        assert task_execute(task_id=task.pk, worker="host:1") == "failed"
        after = timezone.now()
        task.refresh_from_db()
        assert task.status == MemoryTask.Status.FAILED
        assert task.attempts == attempt
        assert task.error.startswith(f"ValueError: boom on attempt {attempt}")
        assert before + timedelta(seconds=low) <= task.run_after <= after + timedelta(seconds=high)
        # The retry is published with the same delay, so the worker runs it when it is due.
        retry = [message for message in broker.published() if message["args"] == [str(task.pk)]][-1]
        assert abs((parse_datetime(retry["eta"]) - task.run_after).total_seconds()) < 1
        assert task_execute(task_id=task.pk, worker="host:1") == "not-claimed"  # not due yet
        MemoryTask.objects.filter(pk=task.pk).update(run_after=timezone.now() - timedelta(hours=1))

    assert task_execute(task_id=task.pk, worker="host:1") == "dead"
    task.refresh_from_db()
    assert task.status == MemoryTask.Status.DEAD
    assert task.attempts == 3
    assert task.finished_at is not None
    assert task.error.startswith("ValueError: boom on attempt 3")
    assert "Traceback" in task.error
    assert task_execute(task_id=task.pk, worker="host:1") == "not-claimed"


@pytest.mark.django_db
def test_an_outcome_is_discarded_when_the_task_was_taken_over_while_it_ran(organization, handlers):
    def marked_dead_meanwhile(task):
        task_mark_dead(task=MemoryTask.objects.get(pk=task.pk), reason="operator gave up")
        return {"finished": True}

    handlers("test_taken_over", marked_dead_meanwhile)
    task = due_task(organization, task_type="test_taken_over")

    task_execute(task_id=task.pk, worker="host:1")

    task.refresh_from_db()
    assert task.status == MemoryTask.Status.DEAD
    assert task.error == "operator gave up"
    assert task.result is None


# Beat jobs: stale recovery, re-publishing, pruning.


@pytest.mark.django_db
def test_recover_requeues_a_running_row_with_a_stale_heartbeat(
    organization, broker, settings, django_capture_on_commit_callbacks
):
    settings.TASK_STALE_AFTER_SECONDS = 60
    now = timezone.now()
    stale = due_task(
        organization,
        status=MemoryTask.Status.RUNNING,
        attempts=1,
        max_attempts=3,
        claimed_by="gone:1",
        heartbeat_at=now - timedelta(seconds=61),
    )
    alive = due_task(
        organization,
        status=MemoryTask.Status.RUNNING,
        attempts=1,
        claimed_by="alive:1",
        heartbeat_at=now - timedelta(seconds=30),
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert recover_stale_tasks() == {"requeued": 1, "dead": 0}

    stale.refresh_from_db()
    assert stale.status == MemoryTask.Status.QUEUED
    assert stale.run_after <= timezone.now()
    assert stale.attempts == 1, "the lost attempt still counts against max_attempts"
    assert "gone:1 stopped heart-beating during attempt 1" in stale.error
    alive.refresh_from_db()
    assert alive.status == MemoryTask.Status.RUNNING
    assert published_ids(broker) == [str(stale.pk)]


@pytest.mark.django_db
def test_recover_buries_a_stale_row_whose_attempts_are_used_up(
    organization, broker, settings, django_capture_on_commit_callbacks
):
    settings.TASK_STALE_AFTER_SECONDS = 60
    task = due_task(
        organization,
        status=MemoryTask.Status.RUNNING,
        attempts=3,
        max_attempts=3,
        claimed_by="gone:1",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert recover_stale_tasks() == {"requeued": 0, "dead": 1}

    task.refresh_from_db()
    assert task.status == MemoryTask.Status.DEAD
    assert task.finished_at is not None
    assert "stopped heart-beating during attempt 3" in task.error
    assert published_ids(broker) == []


@pytest.mark.django_db
def test_republish_sends_again_only_due_rows_nobody_picked_up(organization, broker, settings):
    settings.TASK_REPUBLISH_AFTER_SECONDS = 15
    now = timezone.now()
    lost = due_task(organization, run_after=now - timedelta(seconds=60))
    failed_due = due_task(
        organization, status=MemoryTask.Status.FAILED, attempts=1, run_after=now - timedelta(seconds=60)
    )
    due_task(organization, run_after=now)  # just published; give its message time to arrive
    due_task(organization, run_after=now + timedelta(minutes=5))
    due_task(organization, status=MemoryTask.Status.RUNNING, run_after=now - timedelta(minutes=5))
    due_task(organization, status=MemoryTask.Status.SUCCEEDED, run_after=now - timedelta(minutes=5))

    assert republish_due_tasks() == 2

    assert sorted(published_ids(broker)) == sorted([str(lost.pk), str(failed_due.pk)])
    # Both messages still wait in the broker, and each drains every due task: nothing more is sent.
    assert republish_due_tasks() == 0
    assert len(published_ids(broker)) == 2


@pytest.mark.django_db
def test_prune_deletes_old_finished_rows_and_keeps_dead_ones(organization, settings):
    settings.TASK_RETENTION_DAYS = 7
    old, recent = timezone.now() - timedelta(days=8), timezone.now() - timedelta(days=1)
    old_succeeded = due_task(organization, status=MemoryTask.Status.SUCCEEDED, finished_at=old)
    old_cancelled = due_task(organization, status=MemoryTask.Status.CANCELLED, finished_at=old)
    recent_succeeded = due_task(organization, status=MemoryTask.Status.SUCCEEDED, finished_at=recent)
    old_dead = due_task(organization, status=MemoryTask.Status.DEAD, finished_at=timezone.now() - timedelta(days=90))
    queued = due_task(organization)

    assert prune_finished_tasks() == 2

    remaining = set(MemoryTask.objects.values_list("pk", flat=True))
    assert {old_succeeded.pk, old_cancelled.pk}.isdisjoint(remaining)
    assert {recent_succeeded.pk, old_dead.pk, queued.pk} <= remaining


# Advisory locks.


@pytest.mark.django_db
def test_advisory_lock_without_waiting_fails_fast_while_another_connection_holds_it():
    held, release, done, errors = threading.Event(), threading.Event(), threading.Event(), []

    def holder():
        try:
            with advisory_lock("distill:org:user"):
                held.set()
                release.wait(15)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(15)
        with pytest.raises(LockNotAvailable):
            with advisory_lock("distill:org:user", wait=False):
                pass
        with advisory_lock("distill:org:other-user", wait=False):
            pass  # another key is free
    finally:
        release.set()
        thread.join(15)
    assert done.is_set() and not errors
    with advisory_lock("distill:org:user", wait=False):
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
            assert cursor.fetchone()[0] == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0, "the lock is released when the block ends"


# GET /api/v1/tasks/<id>/


@pytest.mark.django_db
def test_task_endpoint_shows_the_callers_organisation_task(client_a, api):
    task = due_task(
        client_a.organization,
        scope=client_a.write_scope,
        task_type="test_echo",
        status=MemoryTask.Status.FAILED,
        attempts=2,
        error="ValueError: boom\nTraceback (most recent call last): ...",
    )

    response = api.get(f"/api/v1/tasks/{task.pk}/")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(task.pk)
    assert (body["task_type"], body["status"], body["attempts"]) == ("test_echo", "failed", 2)
    assert body["error"] == "ValueError: boom", "tracebacks stay in the admin"


@pytest.mark.django_db
def test_a_task_id_handed_to_another_client_answers_for_it(client_a, organization):
    """A write-only client asking for work an active task already carries (a debounced extraction)
    is answered with that task's id; the id answers GET tasks/<id>/ for it, not for its neighbours."""
    from tests.factories import ClientFactory

    writer = ClientFactory(organization=organization, name="writer", write_scope="default", read_scopes=[])
    neighbour = ClientFactory(organization=organization, name="neighbour", write_scope="default", read_scopes=[])
    first = enqueue("test_noop", {}, organization=organization, scope="default", client=client_a, idempotency_key="k")

    assert (
        enqueue("test_noop", {}, organization=organization, scope="default", client=writer, idempotency_key="k")
        == first
    )

    assert api_for(writer).get(f"/api/v1/tasks/{first.pk}/").status_code == 200
    assert api_for(neighbour).get(f"/api/v1/tasks/{first.pk}/").status_code == 404
    first.refresh_from_db()
    assert first.handed_to == [writer.pk], "handed to once, however often it is asked for"
    enqueue("test_noop", {}, organization=organization, scope="default", client=writer, idempotency_key="k")
    first.refresh_from_db()
    assert first.handed_to == [writer.pk]


@pytest.mark.django_db
def test_task_endpoint_answers_a_foreign_task_exactly_like_a_missing_one(api, foreign_client):
    foreign = due_task(foreign_client.organization, scope=foreign_client.write_scope)

    foreign_response = api.get(f"/api/v1/tasks/{foreign.pk}/")
    missing_response = api.get(f"/api/v1/tasks/{uuid.uuid4()}/")
    malformed_response = api.get("/api/v1/tasks/not-a-uuid/")

    assert foreign_response.status_code == missing_response.status_code == malformed_response.status_code == 404
    assert foreign_response.content == missing_response.content == malformed_response.content
    assert api_for(foreign_client).get(f"/api/v1/tasks/{foreign.pk}/").status_code == 200


# Admin.


@pytest.mark.django_db
def test_admin_lists_a_dead_task_with_its_error(admin_client, organization, handlers, django_assert_max_num_queries):
    def fails(task):
        raise ValueError("the last error")

    handlers("test_fails", fails)
    dead = due_task(organization, task_type="test_fails", max_attempts=1)
    assert task_execute(task_id=dead.pk, worker="host:1") == "dead"
    for _ in range(5):
        due_task(OrganizationFactory(), status=MemoryTask.Status.SUCCEEDED)

    # Six rows of six organisations: an N+1 on the organisation column would add a query per row.
    with django_assert_max_num_queries(9):
        assert admin_client.get("/admin/pipeline/memorytask/").status_code == 200

    response = admin_client.get("/admin/pipeline/memorytask/", {"status__exact": "dead"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "test_fails" in page
    assert "ValueError: the last error" in page
    assert list(response.context["cl"].result_list) == [dead]


@pytest.mark.django_db
def test_admin_retry_now_requeues_a_dead_task_and_publishes_it(
    admin_client, organization, broker, django_capture_on_commit_callbacks
):
    dead = due_task(
        organization,
        status=MemoryTask.Status.DEAD,
        attempts=5,
        max_attempts=5,
        finished_at=timezone.now(),
        error="RuntimeError: gave up",
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/pipeline/memorytask/",
            {"action": "retry_now", ACTION_CHECKBOX_NAME: [str(dead.pk)], "index": 0},
        )

    assert response.status_code == 302
    dead.refresh_from_db()
    assert dead.status == MemoryTask.Status.QUEUED
    assert dead.max_attempts == 6, "one more attempt is allowed"
    assert dead.finished_at is None
    assert published_ids(broker) == [str(dead.pk)]


@pytest.mark.django_db
def test_admin_retry_now_refuses_a_dead_task_whose_key_an_active_task_holds(admin_client, organization):
    dead = due_task(organization, status=MemoryTask.Status.DEAD, attempts=5, idempotency_key="extract:s1")
    successor = due_task(organization, idempotency_key="extract:s1")

    response = admin_client.post(
        "/admin/pipeline/memorytask/",
        {"action": "retry_now", ACTION_CHECKBOX_NAME: [str(dead.pk)], "index": 0},
        follow=True,
    )

    assert response.status_code == 200
    messages = [str(message) for message in response.context["messages"]]
    assert any("already holds its idempotency key" in message for message in messages), messages
    dead.refresh_from_db()
    assert dead.status == MemoryTask.Status.DEAD
    successor.refresh_from_db()
    assert successor.status == MemoryTask.Status.QUEUED


@pytest.mark.django_db
def test_admin_mark_dead_buries_a_queued_task(admin_client, organization):
    queued = due_task(organization)

    response = admin_client.post(
        "/admin/pipeline/memorytask/",
        {"action": "mark_dead", ACTION_CHECKBOX_NAME: [str(queued.pk)], "index": 0},
    )

    assert response.status_code == 302
    queued.refresh_from_db()
    assert queued.status == MemoryTask.Status.DEAD
    assert queued.finished_at is not None
    assert queued.error.startswith("Marked dead by admin")
    assert task_claim(task_id=queued.pk, worker="host:1") is None


@pytest.mark.django_db(transaction=True)
def test_a_long_handler_keeps_its_heartbeat_fresh(settings, organization):
    from apps.pipeline.registry import HANDLERS

    settings.TASK_HEARTBEAT_SECONDS = 0.2
    seen = []

    def slow(task):
        started = MemoryTask.objects.get(pk=task.pk).heartbeat_at
        time.sleep(1.0)
        seen.append((started, MemoryTask.objects.get(pk=task.pk).heartbeat_at))
        return {}

    HANDLERS["test_slow_heartbeat"] = slow
    try:
        task = enqueue("test_slow_heartbeat", {}, organization=organization)
        assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    finally:
        HANDLERS.pop("test_slow_heartbeat", None)
    ((before, after),) = seen
    assert after > before  # refreshed while the handler ran


@pytest.mark.django_db(transaction=True)
def test_a_batched_type_prepares_the_tasks_it_takes_and_gives_the_rest_back(
    organization, handlers, settings, monkeypatch
):
    """A batched type's tasks are claimed together; `prepare` runs once for those it takes, whose handlers
    then run; the rest go back to the queue unstarted (no attempt spent) and run in a later batch. A
    `prepare` that fails leaves each handler to do its own work."""
    from apps.pipeline.registry import BATCHES

    prepared, ran = [], []

    def prepare(tasks):
        prepared.append([task.payload["n"] for task in tasks])
        if tasks[0].payload["n"] == 2:
            raise RuntimeError("the shared step failed")
        return 2  # takes the first two

    handlers("test_batched", lambda task: ran.append(task.payload["n"]) or {})
    monkeypatch.setitem(BATCHES, "test_batched", (prepare, "EMBED_BATCH_TASKS"))
    settings.EMBED_BATCH_TASKS = 3
    for n in range(5):
        due_task(
            organization,
            task_type="test_batched",
            payload={"n": n},
            run_after=timezone.now() - timedelta(seconds=60 - n),
        )

    assert tasks_drain(worker="host:1") == {"succeeded": 5}

    # 0 with 1 and 2: 0 and 1 taken, 2 back to the queue. Then 2 leads a batch (with 3 and 4, or with 4
    # when the drain's growing claim already holds 3), whose prepare fails: each does its own work.
    assert prepared[0] == [0, 1, 2] and prepared[1][0] == 2
    assert ran[:3] == [0, 1, 2] and sorted(ran) == [0, 1, 2, 3, 4]
    assert set(MemoryTask.objects.values_list("attempts", flat=True)) == {1}
    batched = MemoryTask.objects.filter(payload__n__in=[0, 1])
    assert all("batch_s" in task.timings for task in batched)
