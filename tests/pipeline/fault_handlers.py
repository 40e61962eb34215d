"""Handlers that the worker subprocesses of the fault tests import (`celery worker --include`)."""

import os
import time

from django.db import connection

from apps.pipeline.registry import register_handler

SLOW_SIDE_EFFECT = "test_fault_slow_side_effect"
ALWAYS_RAISES = "test_fault_always_raises"

# Created and dropped by the fault tests; not Django models, so no migration carries them.
EFFECTS_TABLE = "test_fault_effect"
RUNS_TABLE = "test_fault_run"


def rows(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@register_handler(SLOW_SIDE_EFFECT)
def slow_side_effect(task) -> dict:
    """Records the run, applies its side effect idempotently, then sleeps on its first attempt
    so a test can kill the worker in the middle of it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS_TABLE} (task_id, attempt, pid) VALUES (%s, %s, %s)",
            [str(task.id), task.attempts, os.getpid()],
        )
        cursor.execute(
            f"INSERT INTO {EFFECTS_TABLE} (task_id) VALUES (%s) ON CONFLICT (task_id) DO NOTHING",
            [str(task.id)],
        )
    if task.attempts == 1:
        time.sleep(float(task.payload.get("first_attempt_sleep", 60)))
    return {"pid": os.getpid(), "attempt": task.attempts}


@register_handler(ALWAYS_RAISES)
def always_raises(task) -> dict:
    raise RuntimeError(f"always fails (attempt {task.attempts} in pid {os.getpid()})")
