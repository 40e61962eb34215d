"""Authenticated API keys kept per process, so a request reads no key, client or organisation rows,
and dropped by every process at once when anything a key may do changes.

An entry holds the client and key rows read for a key prefix, stamped with the tenancy generation:
the token of the one TenancyGeneration row, replaced inside the transaction of every save or delete
of an organisation, client or key (the models' signals, connected in `TenancyConfig.ready`) and of
every bulk revocation (`client_revoke_keys`). A request reads the token first (one primary-key read
on the primary database, no ORM) and serves its entry only while the token is the one the entry was
stamped with and the entry is younger than API_KEY_CACHE_SECONDS; otherwise it reads the rows again.

The bound: the new token commits in the same transaction as the change, so a request whose token
read starts after a revocation has committed reads the key again and refuses it, in every process;
no process accepts a revoked key after the revocation's commit. Redis plays no part, so neither a
process in its Redis back-off, nor a Redis that is down, restarted empty or restored from an older
snapshot, can keep or bring back a revoked key. The token is read before the rows, so a change
committed while they are read leaves the entry with an old token.

Inside a transaction the token is replaced before the change's rows are written (pre_save,
pre_delete): every transaction that changes tenancy rows takes the generation row's lock first, so
two of them cannot deadlock on it. A save outside any transaction commits on its own; the token is
replaced right after it (post_save, post_delete), which drops anything read meanwhile. The services
that weaken a key (`api_key_revoke`, `client_revoke_keys`, `client_set_status`) are transactions.
A write on these tables that sends no model signal (a queryset update or delete, raw SQL) must call
`invalidate()` in its transaction, before it writes. API_KEY_CACHE_SECONDS=0 turns the cache off.
"""

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
    """Every process drops its cached keys when the current transaction commits (at once outside one)."""
    with connections[using].cursor() as cursor:
        cursor.execute(_REPLACE)


def before_tenancy_change(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """Receiver of pre_save and pre_delete for Organization, Client and ClientAPIKey."""
    if connections[using].in_atomic_block:
        invalidate(using=using)


def after_tenancy_change(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """Receiver of post_save and post_delete for Organization, Client and ClientAPIKey."""
    if not connections[using].in_atomic_block:
        invalidate(using=using)


def clear() -> None:
    """Forgets this process's entries (tests)."""
    with _lock:
        _entries.clear()
