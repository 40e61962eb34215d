"""Read replicas (DATABASE_REPLICA_URLS): which copy of the database a read reads from, by measured lag
and each client's last write position (read-your-writes); `default` whenever in doubt, never an error."""

import collections
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
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
    """Rows from any copy may relate: they are the same rows."""

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
    """A WAL position (`16/B374D848`) as a number."""
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
# (when, position): how far the primary had flushed its WAL at moments of the last few seconds.
_primary_samples: collections.deque[tuple[float, int]] = collections.deque()
_lock = threading.Lock()


def reset() -> None:
    """Forgets every measurement (tests that start or stop a replica)."""
    with _lock:
        _states.clear()
        _primary_samples.clear()


def _sample_primary(now: float) -> None:
    """Samples how far the primary has flushed its WAL (all a replica can have been sent), at most once
    per REPLICA_CHECK_SECONDS; WAL without commits (vacuum, checkpoints) then never looks like lag."""
    with _lock:
        if _primary_samples and now - _primary_samples[-1][0] < settings.REPLICA_CHECK_SECONDS:
            return
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
        position = lsn_number(cursor.fetchone()[0])
    with _lock:
        _primary_samples.append((now, position))
        horizon = now - settings.REPLICA_MAX_LAG_SECONDS - 2 * settings.REPLICA_CHECK_SECONDS
        while len(_primary_samples) > 1 and _primary_samples[0][0] < horizon:
            _primary_samples.popleft()


def _lag(replayed: int, now: float) -> float:
    """How stale a replica that has replayed `replayed` is at most: the age of the latest sample of the
    primary it has caught up with (0 when it has the latest; an idle primary flushes nothing new, so
    its replica stays current however old its last transaction). Behind every sample: too far behind."""
    with _lock:
        caught_up = [at for at, position in _primary_samples if position <= replayed]
    return max(now - max(caught_up), 0.0) if caught_up else float("inf")


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
    """None (and marked down) when the replica does not answer."""
    _sample_primary(now)  # the primary down is the primary's outage, not the replica's
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text")
            in_recovery, replayed_text = cursor.fetchone()
    except (OperationalError, InterfaceError):
        mark_down(alias)
        return None
    replayed = lsn_number(replayed_text)
    # A promoted standby (or a URL naming a primary) no longer follows this primary.
    lag = _lag(replayed, now) if in_recovery and replayed is not None else float("inf")
    with _lock:
        state = _states.setdefault(alias, ReplicaState())
        state.checked_at, state.replayed, state.lag_seconds = now, replayed, lag
        return replace(state)


def _state(alias: str, now: float, *, fresh: bool = False) -> ReplicaState | None:
    """The last measurement, renewed when older than REPLICA_CHECK_SECONDS (or `fresh`); None while down."""
    with _lock:
        state = _states.get(alias)
        if state is not None and now < state.down_until:
            return None
        if state is not None and not fresh and now - state.checked_at < settings.REPLICA_CHECK_SECONDS:
            return replace(state)
    return _measure(alias, now)


def _written_position(client) -> int | None:
    """The WAL position of the client's last write still recorded (0: none); None when Redis did not answer."""
    if client is None:
        return 0
    replies = request_redis.run(lambda pipeline: pipeline.get(WRITTEN_KEY.format(client_id=client.pk)))
    return None if replies is None else int(replies[0] or 0)


def primary_position() -> int:
    """The insert position, not the write one: with `synchronous_commit = off` a commit may still be unflushed."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        return lsn_number(cursor.fetchone()[0])


def read_alias(client=None, *, up_to_date: bool = False, wait_seconds: float = 0.0) -> str:
    """A replica that answers, is within REPLICA_MAX_LAG_SECONDS and has replayed the client's last write
    (and, when `up_to_date`, everything committed before this call), waiting up to `wait_seconds`; else `default`."""
    aliases = replica_aliases()
    if not aliases or (written := _written_position(client)) is None:
        return DEFAULT_DB_ALIAS
    needed = max(written, primary_position() if up_to_date else 0)
    deadline = time.monotonic() + wait_seconds
    while True:
        now = time.monotonic()
        for alias in random.sample(aliases, len(aliases)):  # spread the reads over the replicas
            state = _state(alias, now)
            if state is None or state.lag_seconds is None or state.lag_seconds > settings.REPLICA_MAX_LAG_SECONDS:
                continue
            if needed and (state.replayed or 0) < needed:
                # Behind the position needed as last measured: it has most likely replayed it since.
                state = _state(alias, now, fresh=True)
                if state is None or (state.replayed or 0) < needed:
                    continue
            return alias
        if now >= deadline:
            return DEFAULT_DB_ALIAS
        time.sleep(min(0.1, deadline - now))


def replicas_behind(*, timeout: float) -> list[str]:
    """Waits up to `timeout` seconds until every replica reads may be served from has replayed what was
    committed before this call (one down or beyond REPLICA_MAX_LAG_SECONDS serves no reads, and catches up
    past it before it serves again); returns the aliases still behind then (none: done)."""
    aliases = replica_aliases()
    if not aliases:
        return []
    needed = primary_position()
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        behind = []
        for alias in aliases:
            state = _state(alias, now, fresh=True)
            lag = math.inf if state is None or state.lag_seconds is None else state.lag_seconds
            serving = lag <= settings.REPLICA_MAX_LAG_SECONDS
            if serving and (state.replayed or 0) < needed:
                behind.append(alias)
        if not behind or now >= deadline:
            return behind
        time.sleep(min(0.1, deadline - now))


def with_fallback(alias: str, work: Callable[[str], T]) -> T:
    """`work(alias)`, or `work("default")` if the replica fails under it (stopped, a query cancelled by replay)."""
    if alias == DEFAULT_DB_ALIAS:
        return work(alias)
    try:
        return work(alias)
    except (OperationalError, InterfaceError):
        replica = connections[alias]
        if replica.connection is None or not replica.is_usable():
            mark_down(alias)
        else:
            logger.warning("a read on replica %s failed: it is read again from the primary", alias)
        return work(DEFAULT_DB_ALIAS)


def read_on_replica(client, work: Callable[..., T]) -> T:
    """`work(reader)` with the client's reader on `read_alias(client)`, again on the primary if that fails."""
    return with_fallback(read_alias(client), lambda alias: work(client.reader.on(alias)))


def note_write(client) -> None:
    """Records the primary's WAL position after the commit, for the client's next reads (read-your-writes)."""
    if client is None or not replica_aliases():
        return
    transaction.on_commit(lambda: _record_write(client.pk))


def _record_write(client_id) -> None:
    position = primary_position()
    seconds = int(settings.REPLICA_MAX_LAG_SECONDS) + WRITTEN_MARGIN_SECONDS
    request_redis.run(
        lambda pipeline: pipeline.eval(_RECORD_MAX, 1, WRITTEN_KEY.format(client_id=client_id), position, seconds)
    )
