"""Workers anywhere (docs/operations.md, "From one machine to many"): worker processes that share
nothing but DATABASE_URL and the broker, each with a DATA_DIR of its own as on separate machines,
run every task exactly once between them."""

from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue
from apps.pipeline.services.execution import BATCH_HOLD_SECONDS
from harness.processes import CeleryWorker, wait_for
from tests.pipeline.fault_handlers import EFFECTS_TABLE, RUNS_TABLE, SLOW_SIDE_EFFECT, rows

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TASKS = 60


def test_two_workers_with_their_own_data_dirs_run_every_task_exactly_once(broker, run_tables, organization, tmp_path):
    workers = []
    try:
        for name in ("machine-a", "machine-b"):
            data_dir = tmp_path / name
            data_dir.mkdir()
            worker = CeleryWorker(
                broker_url=broker.url,
                settings_dict=connection.settings_dict,
                log_path=tmp_path / f"{name}.log",
                include="tests.pipeline.fault_handlers",
                pool="prefork",
                concurrency=2,
                env={"DATA_DIR": str(data_dir)},
            )
            workers.append(worker.start(timeout=60))

        # Learning-class work, which every process may run at once (compile-class work is capped at
        # TASK_COMPILE_MAX_RUNNING processes, one by default: all 60 tasks ran in one process then).
        # Each task outlasts the drain's hold on a claimed batch (BATCH_HOLD_SECONDS), so a process
        # claims one at a time and the four share the queue.
        payload = {"first_attempt_sleep": BATCH_HOLD_SECONDS + 0.05}
        tasks = [
            enqueue(SLOW_SIDE_EFFECT, payload, organization=organization, priority=MemoryTask.Priority.LEARN)
            for _ in range(TASKS)
        ]
        ids = [task.pk for task in tasks]

        def all_finished() -> bool:
            return not MemoryTask.objects.filter(pk__in=ids).exclude(status=MemoryTask.Status.SUCCEEDED).exists()

        wait_for(all_finished, timeout=120, interval=0.2, message=f"{TASKS} tasks to succeed")

        runs = rows(f"SELECT task_id, attempt, pid FROM {RUNS_TABLE}")
        per_task = Counter(task_id for task_id, _attempt, _pid in runs)
        assert sorted(per_task) == sorted(ids)
        assert set(per_task.values()) == {1}, "a task ran more than once"
        assert rows(f"SELECT count(*) FROM {EFFECTS_TABLE}") == [(TASKS,)]
        # Both machines took work: each pool process that ran a task is a child of one of the two workers.
        pids = Counter(task.result["pid"] for task in MemoryTask.objects.filter(pk__in=ids))
        assert {_parent_pid(pid) for pid in pids} == {worker.pid for worker in workers}, pids
        # No file was written under either DATA_DIR (no embedded database, no state): with DATABASE_URL a
        # worker keeps nothing of its own. (Settings create the empty STATIC_ROOT folder at import.)
        for name in ("machine-a", "machine-b"):
            assert [path for path in (tmp_path / name).rglob("*") if not path.is_dir()] == []
    finally:
        for worker in workers:
            worker.kill()
        for worker in workers:  # shown by pytest when the test failed
            print(f"----- {worker.log_path.name} -----\n{worker.log()}")


def _parent_pid(pid: int) -> int:
    """The parent process of a (still running) pool process."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])
