"""Reads of tenancy data."""

import hashlib
import hmac

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from apps.tenancy import keycache
from apps.tenancy.models import Client, ClientAPIKey, Organization

KEY_PREFIX_LENGTH = 8


def hash_api_key(raw_key: str) -> str:
    # Keys carry 256 bits of randomness, so a fast hash is as strong as a slow one here.
    return hashlib.sha256(raw_key.encode()).hexdigest()


def split_api_key(raw_key: str) -> str | None:
    """Keys look like `mp_<prefix>_<secret>`; returns the prefix or None when malformed."""
    parts = raw_key.split("_", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "mp" and len(parts[1]) == KEY_PREFIX_LENGTH else None


def client_for_api_key(*, raw_key: str) -> tuple[Client, ClientAPIKey] | None:
    """From this process's cache while the tenancy generation allows, else from the primary (a replica
    behind it could still show a revoked key)."""
    prefix = split_api_key(raw_key)
    if prefix is None:
        return None
    hashed_key = hash_api_key(raw_key)
    generation = keycache.current_generation()  # before the rows: a change made meanwhile outdates them
    found = keycache.lookup(prefix, hashed_key, generation)
    if found is None:
        api_key = (
            ClientAPIKey.objects.using(DEFAULT_DB_ALIAS)
            .select_related("client__organization")
            .filter(prefix=prefix, revoked_at__isnull=True)
            .first()
        )
        if api_key is None or not hmac.compare_digest(api_key.hashed_key, hashed_key):
            return None
        keycache.store(prefix, hashed_key, generation, api_key.client, api_key)
        found = api_key.client, api_key
    client, api_key = found
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > settings.API_KEY_LAST_USED_RESOLUTION:
        # At most one write per key per resolution window, not one per request.
        ClientAPIKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return client, api_key


def organization_for_staff(*, user) -> Organization | None:
    membership = getattr(user, "staff_membership", None)
    return membership.organization if membership else None
