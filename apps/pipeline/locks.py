"""Per-key mutual exclusion across processes and machines, on PostgreSQL advisory locks."""

import hashlib
from contextlib import contextmanager

from django.db import connection


class LockNotAvailable(Exception):
    pass


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
