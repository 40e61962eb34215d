"""Read replicas (DATABASE_REPLICA_URLS): which copy of the database a read operation reads from.

A read operation asks `read_alias(client)` once and reads everything from that alias (the reader
carries it: `client.reader.on(alias)`); `read_on_replica` also retries the work on the primary
when the replica fails under it. An alias is a replica only while it answers and is within
REPLICA_MAX_LAG_SECONDS of the primary; otherwise, or with no replica configured, it is
`default`, never an error.

Lag: a replica that has replayed the WAL position the primary reported at most REPLICA_CHECK_SECONDS
ago is current (an idle primary writes nothing, so its replica is current however long ago its last
transaction was); one that has not is as far behind as its last replayed transaction is old.

Read-your-writes: every write operation of a client records, after its commit, the primary's WAL
insert position (not its write position: with `synchronous_commit = off` a commit may still sit in
the WAL buffers) in Redis (`note_write`); that client's reads go to a replica only once it has replayed
that position, so a search right after `memory/add` sees the turns it added. With Redis
unanswering, reads go to the primary (a position could not be recorded, or cannot be read).

`PrimaryWritesRouter` keeps every write and every migration on `default`, also for rows read from a
replica, and lets rows from any copy relate to each other (they are the same rows).
"""

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction

from apps.core import request_redis

logger = logging.getLogger(__name__)

REPLICA_PREFIX = "replica_"
WRITTEN_KEY = "replica:written:{client_id}"
# A recorded write position is kept for this long beyond REPLICA_MAX_LAG_SECONDS: by then every
# replica that is still read from has replayed it.
WRITTEN_MARGIN_SECONDS = 60
# Keeps the larger of two positions, so concurrent writes of one client never lower it.
_RECORD_MAX = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then
    redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
    redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 1
"""

T = TypeVar("T")


class PrimaryWritesRouter:
    """Writes and migrations go to the primary; reads go where the caller's queryset says (`using`)."""

    def db_for_read(self, model, **hints):
        return None  # Django's default: the queryset's `using`, else the related instance's database

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db == DEFAULT_DB_ALIAS


def replica_aliases() -> list[str]:
    return sorted(alias for alias in settings.DATABASES if alias.startswith(REPLICA_PREFIX))


def lsn_number(text: str | None) -> int | None:
    """A WAL position (`16/B374D848`) as a number, for comparing and storing."""
    if not text:
        return None
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass
class ReplicaState:
    checked_at: float = float("-inf")
    down_until: float = 0.0
    replayed: int | None = None  # WAL position replayed, as of `checked_at`
    lag_seconds: float | None = None


_states: dict[str, ReplicaState] = {}
_primary = {"position": None, "at": float("-inf")}
_lock = threading.Lock()


def reset() -> None:
    """Forgets every measurement (tests that start or stop a replica)."""
    with _lock:
        _states.clear()
        _primary.update(position=None, at=float("-inf"))


def _primary_position(now: float) -> int:
    """The primary's current WAL position, read at most once per REPLICA_CHECK_SECONDS per process."""
    with _lock:
        if now - _primary["at"] < settings.REPLICA_CHECK_SECONDS and _primary["position"] is not None:
            return _primary["position"]
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        position = lsn_number(cursor.fetchone()[0])
    with _lock:
        _primary.update(position=position, at=now)
    return position


def mark_down(alias: str) -> None:
    """A replica that failed: its reads go to the primary for REPLICA_RETRY_SECONDS."""
    with _lock:
        state = _states.setdefault(alias, ReplicaState())
        state.down_until = time.monotonic() + settings.REPLICA_RETRY_SECONDS
        state.checked_at = float("-inf")
    try:
        connections[alias].close()
    except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is dropped either way
        logger.debug("closing the connection to %s failed", alias)
    logger.warning("read replica %s is not answering: its reads go to the primary", alias)


def _measure(alias: str, now: float) -> ReplicaState | None:
    """What the replica has replayed and how far behind it is now; None (and marked down) when it
    does not answer."""
    primary = _primary_position(now)  # the primary down is the primary's outage, not the replica's
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
                " extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
            )
            in_recovery, replayed_text, since_last = cursor.fetchone()
    except (OperationalError, InterfaceError):
        mark_down(alias)
        return None
    replayed = lsn_number(replayed_text)
    if not in_recovery:
        # A promoted standby (or a URL naming a primary) no longer follows this primary.
        lag = float("inf")
    elif replayed is not None and replayed >= primary:
        lag = 0.0
    else:
        lag = float(since_last) if since_last is not None else float("inf")
    with _lock:
        state = _states.setdefault(alias, ReplicaState())
        state.checked_at, state.replayed, state.lag_seconds = now, replayed, lag
        return ReplicaState(state.checked_at, state.down_until, state.replayed, state.lag_seconds)


def _state(alias: str, now: float, *, fresh: bool = False) -> ReplicaState | None:
    """The replica's last measurement, measured again when older than REPLICA_CHECK_SECONDS (or
    `fresh`); None while it is down."""
    with _lock:
        state = _states.get(alias)
        if state is not None and now < state.down_until:
            return None
        if state is not None and not fresh and now - state.checked_at < settings.REPLICA_CHECK_SECONDS:
            return ReplicaState(state.checked_at, state.down_until, state.replayed, state.lag_seconds)
    return _measure(alias, now)


def _written_position(client) -> int | None:
    """The WAL position of the client's last write still recorded (0: none); None when Redis did not answer."""
    if client is None:
        return 0
    replies = request_redis.run(lambda pipeline: pipeline.get(WRITTEN_KEY.format(client_id=client.pk)))
    if replies is None:
        return None
    return int(replies[0] or 0)


def read_alias(client=None) -> str:
    """The database alias a read of `client` (None: a read of no particular client) goes to: a
    replica that answers, is within REPLICA_MAX_LAG_SECONDS and has replayed the client's last
    write; else `default`."""
    aliases = replica_aliases()
    if not aliases:
        return DEFAULT_DB_ALIAS
    written = _written_position(client)
    if written is None:
        return DEFAULT_DB_ALIAS
    now = time.monotonic()
    for alias in random.sample(aliases, len(aliases)):  # spread the reads over the replicas
        state = _state(alias, now)
        if state is None or state.lag_seconds is None or state.lag_seconds > settings.REPLICA_MAX_LAG_SECONDS:
            continue
        if written and (state.replayed or 0) < written:
            # Behind this client's write as last measured: it has most likely replayed it since.
            state = _state(alias, now, fresh=True)
            if state is None or (state.replayed or 0) < written:
                continue
        return alias
    return DEFAULT_DB_ALIAS


def read_on_replica(client, work: Callable[..., T]) -> T:
    """`work(reader)` with the client's reader on the alias `read_alias(client)` chooses (the work
    reads everything through that reader); if a replica fails under it (stopped, restarted, its
    connection lost, a query cancelled by replay), the same work again on the primary. The caller
    sees the primary's answer, never the replica's error."""
    alias = read_alias(client)
    if alias == DEFAULT_DB_ALIAS:
        return work(client.reader)
    try:
        return work(client.reader.on(alias))
    except (OperationalError, InterfaceError):
        replica = connections[alias]
        if replica.connection is None or not replica.is_usable():
            mark_down(alias)
        else:
            logger.warning("a read on replica %s failed: it is read again from the primary", alias)
        return work(client.reader)


def note_write(client) -> None:
    """Records, once the current transaction commits, the primary's WAL position for the client's
    next reads (read-your-writes). Nothing to do without replicas."""
    if client is None or not replica_aliases():
        return
    transaction.on_commit(lambda: _record_write(client.pk))


def _record_write(client_id) -> None:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        position = lsn_number(cursor.fetchone()[0])
    seconds = int(settings.REPLICA_MAX_LAG_SECONDS) + WRITTEN_MARGIN_SECONDS
    request_redis.run(
        lambda pipeline: pipeline.eval(_RECORD_MAX, 1, WRITTEN_KEY.format(client_id=client_id), position, seconds)
    )
