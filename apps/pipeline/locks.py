"""Per-key mutual exclusion across processes and machines, on PostgreSQL advisory locks, and the
registry of the locks each app's work takes: erasure takes every registered lock of its subject."""

import hashlib
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, Error, connection, connections

from apps.core.timing import timed
from apps.pipeline.registry import NotYet

# How often a lock with a bounded wait is tried again.
_POLL_SECONDS = 0.05


class LockNotAvailable(NotYet):
    """Another session holds the lock: a task that raises it waits in the queue and runs again."""


def _lock_id(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


def _try(cursor, function: str, lock_id: int) -> bool:
    cursor.execute(f"SELECT {function}(%s)", [lock_id])
    return cursor.fetchone()[0]


@contextmanager
def advisory_lock(key: str, *, wait: bool = True, timeout: float | None = None):
    """A session-level advisory lock for the block. wait=False raises LockNotAvailable at once (a task is
    retried rather than tie up a worker); `timeout` bounds the wait."""
    lock_id = _lock_id(key)
    with connection.cursor() as cursor:
        if wait and timeout is None:
            with timed("lock_wait"):
                cursor.execute("SELECT pg_advisory_lock(%s)", [lock_id])
        elif not _try(cursor, "pg_try_advisory_lock", lock_id):
            if not wait:
                raise LockNotAvailable(f"Another worker holds the lock {key!r}")
            deadline = time.monotonic() + timeout
            with timed("lock_wait"):
                while not _try(cursor, "pg_try_advisory_lock", lock_id):
                    if time.monotonic() >= deadline:
                        raise LockNotAvailable(f"Another worker holds the lock {key!r}")
                    time.sleep(_POLL_SECONDS)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock_id])


@contextmanager
def advisory_locks(keys: Iterable[str], *, wait: bool = True, timeout: float | None = None):
    """advisory_lock on each of `keys`, in one order (two holders of several never deadlock)."""
    with ExitStack() as locks:
        for key in sorted(set(keys)):
            locks.enter_context(advisory_lock(key, wait=wait, timeout=timeout))
        yield


def advisory_xact_lock(key: str) -> None:
    """Until the transaction ends: for short critical sections that must see what the previous holder committed."""
    if not connection.in_atomic_block:
        raise RuntimeError("advisory_xact_lock needs a transaction: the lock ends with it")
    with connection.cursor() as cursor, timed("lock_wait"):
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_id(key)])


def advisory_xact_lock_shared(key: str) -> None:
    """Until the transaction ends, without waiting (LockNotAvailable under an erasure): for work that must
    hold it until what it wrote is committed."""
    if not connection.in_atomic_block:
        raise RuntimeError("advisory_xact_lock_shared needs a transaction: the lock ends with it")
    with connection.cursor() as cursor:
        if not _try(cursor, "pg_try_advisory_xact_lock_shared", _lock_id(key)):
            raise LockNotAvailable(f"An erasure holds the lock {key!r}")


# The server's TCP keepalive for a standing lock's session (ignored over a Unix socket).
_LOCK_KEEPALIVES = (("tcp_keepalives_idle", 10), ("tcp_keepalives_interval", 5), ("tcp_keepalives_count", 3))


class StandingLock:
    """An advisory lock held for the process's life on a connection of its own, which Django's
    close_old_connections cannot close; ending the process (or losing the connection) frees it."""

    def __init__(self, key: str, *, using: str = DEFAULT_DB_ALIAS):
        self.key, self.using = key, using
        self._connection = None

    def acquire(self) -> bool:
        """Without waiting; True while this process holds it."""
        if self.held():
            return True
        self._connection = connections.create_connection(self.using)
        # Error: the database is down or the connection broke.
        with suppress(Error), self._connection.cursor() as cursor:
            # A holder whose machine vanishes (no FIN) would keep the lock until the server's TCP
            # keepalive gives up, two hours by default: this session's gives up within 25 s.
            for setting, seconds in _LOCK_KEEPALIVES:
                cursor.execute(f"SET {setting} = {seconds}")
            if _try(cursor, "pg_try_advisory_lock", _lock_id(self.key)):
                return True
        self.release()
        return False

    def held(self) -> bool:
        """Whether its connection still answers: a session lock lives exactly as long as its session."""
        if self._connection is None:
            return False
        try:
            with self._connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except Error:  # the database is down or the connection broke
            self.release()
            return False

    def release(self) -> None:
        if self._connection is not None:
            with suppress(Error):  # the database is down or the connection broke
                self._connection.close()
            self._connection = None


@dataclass(frozen=True)
class WorkOf:
    """Whose work a lock guards; `client_ids` are those whose written turns it reads (a client erasure's)."""

    organization_id: object
    end_user_ids: tuple = ()
    scopes: tuple = ()
    client_ids: tuple = ()


# Each app declares once, from its AppConfig.ready(), the lock keys its work takes for a WorkOf.
_WORK_LOCKS: list[Callable[[WorkOf], Iterable[str]]] = []


def register_work_locks(keys: Callable[[WorkOf], Iterable[str]]) -> None:
    """`keys(work)` names the advisory locks the app's handlers take for that work."""
    if keys not in _WORK_LOCKS:
        _WORK_LOCKS.append(keys)


@dataclass(frozen=True)
class UserLocks:
    """The advisory lock of work that runs one at a time per end user."""

    prefix: str

    def key(self, *, organization_id, end_user_id) -> str:
        return f"{self.prefix}:{organization_id}:{end_user_id}"

    def key_of(self, owned) -> str:
        return self.key(organization_id=owned.organization_id, end_user_id=owned.end_user_id)

    def of_work(self, work: WorkOf) -> list[str]:
        return [self.key(organization_id=work.organization_id, end_user_id=user) for user in work.end_user_ids]


def work_lock_keys(work: WorkOf) -> list[str]:
    """Every registered lock of `work`, each once, in one order: two erasures never deadlock."""
    return sorted({key for keys in _WORK_LOCKS for key in keys(work)})
