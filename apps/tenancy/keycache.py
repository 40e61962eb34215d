"""Authenticated API keys cached per process while the TenancyGeneration token they were stamped with is
the committed one; every tenancy change replaces it in its transaction, so no process keeps a revoked key."""

import copy
import threading
import time
from typing import NamedTuple

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from apps.tenancy.models import TenancyGeneration

MAX_ENTRIES = 10_000
_TABLE = TenancyGeneration._meta.db_table
_READ = f"SELECT token FROM {_TABLE} WHERE id = 1"
_REPLACE = (
    f"INSERT INTO {_TABLE} (id, token) VALUES (1, gen_random_uuid())"
    " ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token"
)


class Entry(NamedTuple):
    hashed_key: str
    client: object
    api_key: object
    generation: object
    stored_at: float


_entries: dict[str, Entry] = {}
_lock = threading.Lock()


def current_generation():
    """The committed tenancy generation, or None when nothing may be cached (cache off, or no row).
    Read on the primary: a replica behind it would hand out the token from before a revocation."""
    if not settings.API_KEY_CACHE_SECONDS:
        return None
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_READ)
        row = cursor.fetchone()
    return row[0] if row else None


def lookup(prefix: str, hashed_key: str, generation):
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


def store(prefix: str, hashed_key: str, generation, client, api_key) -> None:
    if generation is None:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[prefix] = Entry(hashed_key, copy.copy(client), api_key, generation, time.monotonic())


def invalidate(*, using: str = DEFAULT_DB_ALIAS) -> None:
    """Every process drops its cached keys when the current transaction commits. A write that sends no
    model signal (a queryset update, raw SQL) must call this in its transaction, before it writes."""
    with connections[using].cursor() as cursor:
        cursor.execute(_REPLACE)


def before_tenancy_change(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """pre_save/pre_delete: in a transaction the generation row is locked first, so two cannot deadlock on it."""
    if connections[using].in_atomic_block:
        invalidate(using=using)


def after_tenancy_change(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """post_save/post_delete: a save outside a transaction commits alone; the token replaced after it."""
    if not connections[using].in_atomic_block:
        invalidate(using=using)


def clear() -> None:
    """Forgets this process's entries (tests)."""
    with _lock:
        _entries.clear()
