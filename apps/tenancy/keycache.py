"""Authenticated API keys kept per process, so a request costs no database lookup, and dropped by
every process at once when anything a key may do changes.

An entry holds the client and key rows read for a key prefix, stamped with the tenancy generation:
a random token in Redis (`RATE_LIMIT_REDIS_URL`) that is replaced whenever an organisation, a
client or a key is saved or deleted (the models' signals, connected in `TenancyConfig.ready`) and
when keys are revoked in bulk (`client_revoke_keys`). It is replaced once as the change is made and
once more when its transaction commits: a process that read the old rows in between is caught by
the second. A Redis that restarted empty gets a new token from the first request that asks, so no
entry from before the restart survives it.

A request reads the generation (one round trip to Redis, no database) and keeps its entry only while the
generation is unchanged and the entry is younger than API_KEY_CACHE_SECONDS; otherwise the rows
are read from PostgreSQL again. So a revoked key or a disabled client is refused on the next
request in every process, as without the cache. The generation is read before the rows, so a
change committed while they are read leaves the entry with an old generation.

Redis unreachable: nothing is kept or served from the cache, and every request reads PostgreSQL
(request_redis stops asking for RATE_LIMIT_RETRY_SECONDS after a failure). A change whose
new token could not reach Redis is logged; the entry's age bounds how long another process that
still reaches Redis could serve it. API_KEY_CACHE_SECONDS=0 turns the cache off.
"""

import copy
import logging
import threading
import time
import uuid
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from apps.core import request_redis

logger = logging.getLogger(__name__)

GENERATION_KEY = "tenancy:generation"
MAX_ENTRIES = 10_000


class Entry(NamedTuple):
    hashed_key: str
    client: object
    api_key: object
    generation: bytes
    stored_at: float


_entries: dict[str, Entry] = {}
_lock = threading.Lock()


def current_generation() -> bytes | None:
    """The tenancy generation, or None when Redis does not answer (then nothing is cached)."""
    if not settings.API_KEY_CACHE_SECONDS:
        return None
    replies = request_redis.run(lambda pipeline: pipeline.set(GENERATION_KEY, _token(), nx=True).get(GENERATION_KEY))
    if replies is None:
        with _lock:
            _entries.clear()
        return None
    return replies[1]


def lookup(prefix: str, hashed_key: str, generation: bytes | None):
    """(client, api_key) of a valid entry for the key, else None. The client is a copy the request
    may change; the key row is shared, so the last-used time written through it is seen by all."""
    if generation is None:
        return None
    entry = _entries.get(prefix)
    if (
        entry is None
        or entry.generation != generation
        or entry.hashed_key != hashed_key
        or time.monotonic() - entry.stored_at > settings.API_KEY_CACHE_SECONDS
    ):
        return None
    return copy.copy(entry.client), entry.api_key


def store(prefix: str, hashed_key: str, generation: bytes | None, client, api_key) -> None:
    if generation is None:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[prefix] = Entry(hashed_key, copy.copy(client), api_key, generation, time.monotonic())


def _token() -> str:
    return uuid.uuid4().hex


def _renew() -> None:
    replies = request_redis.run(lambda pipeline: pipeline.set(GENERATION_KEY, _token()))
    if replies is None:
        logger.error(
            "a tenancy change could not reach Redis: processes that still reach it may use their cached "
            "API keys for up to API_KEY_CACHE_SECONDS (%s s)",
            settings.API_KEY_CACHE_SECONDS,
        )


def invalidate() -> None:
    """Every process drops its cached keys: now, and again when the current transaction commits."""
    _renew()
    transaction.on_commit(_renew)


def on_tenancy_change(sender, **kwargs) -> None:
    """Receiver of post_save and post_delete for Organization, Client and ClientAPIKey."""
    invalidate()


def clear() -> None:
    """Forgets this process's entries (tests)."""
    with _lock:
        _entries.clear()
