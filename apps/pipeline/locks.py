"""Per-key mutual exclusion across processes and machines, on PostgreSQL advisory locks, and the
registry of the locks each app's work takes: erasure takes every registered lock of its subject."""

import hashlib
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection

from apps.core.timing import timed
from apps.pipeline.registry import NotYet


class LockNotAvailable(NotYet):
    """Another session holds the lock: a task that raises it waits in the queue and runs again."""


def _lock_id(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


@contextmanager
def advisory_lock(key: str, *, wait: bool = True):
    """Holds a session-level advisory lock on `key` for the duration of the block.

    With wait=False it raises LockNotAvailable at once when another session holds it, so
    a task can fail fast and be retried by the pipeline instead of tying up a worker.
    """
    lock_id = _lock_id(key)
    with connection.cursor() as cursor:
        if wait:
            with timed("lock_wait"):
                cursor.execute("SELECT pg_advisory_lock(%s)", [lock_id])
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_id])
            if not cursor.fetchone()[0]:
                raise LockNotAvailable(f"Another worker holds the lock {key!r}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock_id])


@dataclass(frozen=True)
class WorkOf:
    """Whose work a lock guards: an organisation, some of its end users, some of its scopes."""

    organization_id: object
    end_user_ids: tuple = ()
    scopes: tuple = ()


# Each app declares once, from its AppConfig.ready(), the lock keys its work takes for a WorkOf.
_WORK_LOCKS: list[Callable[[WorkOf], Iterable[str]]] = []


def register_work_locks(keys: Callable[[WorkOf], Iterable[str]]) -> None:
    """`keys(work)` names the advisory locks the app's tasks take for that organisation's users and
    scopes (the same keys its handlers pass to advisory_lock)."""
    if keys not in _WORK_LOCKS:
        _WORK_LOCKS.append(keys)


def work_lock_keys(work: WorkOf) -> list[str]:
    """Every registered lock of `work`, each once, in one order: two erasures never deadlock."""
    return sorted({key for keys in _WORK_LOCKS for key in keys(work)})
