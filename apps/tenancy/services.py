"""Writes of tenancy data: organisations, clients, API keys, end users."""

import re
import secrets
import string
from contextlib import suppress

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.tenancy import keycache
from apps.tenancy.models import SCOPE_PATTERN, Client, ClientAPIKey, EndUser, Organization
from apps.tenancy.selectors import KEY_PREFIX_LENGTH, hash_api_key

_PREFIX_ALPHABET = string.ascii_lowercase + string.digits


def validate_scope(scope: str) -> str:
    if not re.fullmatch(SCOPE_PATTERN, scope):
        raise ValidationError(f"Invalid scope {scope!r}: use 1-64 letters, digits, '_', '.', ':' or '-'.")
    return scope


def organization_create(*, name: str) -> Organization:
    name = name.strip()
    if not name:
        raise ValidationError("Organisation name must not be empty.")
    if Organization.objects.filter(name=name).exists():
        raise ValidationError(f"Organisation {name!r} already exists.")
    return Organization.objects.create(name=name)


def api_key_create(*, client: Client) -> tuple[ClientAPIKey, str]:
    """Returns the key row and the raw key; the raw key is never stored and cannot be shown again."""
    while True:
        prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(KEY_PREFIX_LENGTH))
        raw_key = f"mp_{prefix}_{secrets.token_urlsafe(32)}"
        with suppress(IntegrityError), transaction.atomic():  # IntegrityError: a prefix collision, draw again
            api_key = ClientAPIKey.objects.create(client=client, prefix=prefix, hashed_key=hash_api_key(raw_key))
            return api_key, raw_key


@transaction.atomic
def client_create(
    *,
    organization: Organization,
    name: str,
    write_scope: str | None = None,
    read_scopes: list[str] | None = None,
    can_erase: bool = False,
    can_export: bool = False,
    can_manage_webhooks: bool = False,
    requests_per_minute: int | None = None,
) -> tuple[Client, str]:
    """Creates a client and its first API key; without read_scopes it reads its own write scope."""
    name = name.strip()
    if not name:
        raise ValidationError("Client name must not be empty.")
    if write_scope:
        validate_scope(write_scope)
    if read_scopes is None:
        read_scopes = [write_scope] if write_scope else []
    read_scopes = [validate_scope(scope) for scope in dict.fromkeys(read_scopes)]
    if Client.objects.filter(organization=organization, name=name).exists():
        raise ValidationError(f"Client {name!r} already exists in organisation {organization.name!r}.")
    client = Client.objects.create(
        organization=organization,
        name=name,
        write_scope=write_scope or None,
        read_scopes=read_scopes,
        can_erase=can_erase,
        can_export=can_export,
        can_manage_webhooks=can_manage_webhooks,
        requests_per_minute=requests_per_minute,
    )
    return client, api_key_create(client=client)[1]


@transaction.atomic
def api_key_revoke(*, prefix: str) -> ClientAPIKey:
    """Revokes a key; every process refuses it from this transaction's commit on (apps.tenancy.keycache)."""
    api_key = ClientAPIKey.objects.select_related("client").filter(prefix=prefix).first()
    if api_key is None:
        raise ValidationError(f"No API key with prefix {prefix!r}.")
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at", "updated_at"])
    return api_key


@transaction.atomic
def client_revoke_keys(*, client: Client) -> int:
    keycache.invalidate()  # an update sends no signal; before it, as a signal would (keycache's lock order)
    return client.api_keys.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


@transaction.atomic
def client_set_status(*, client: Client, status: str) -> Client:
    client.status = status
    client.full_clean()
    client.save(update_fields=["status", "updated_at"])
    return client


def end_user_get_or_create(*, organization: Organization, user_id: str) -> EndUser:
    """End users are created on first use; safe under concurrent first uses."""
    end_user, _ = EndUser.objects.get_or_create(organization=organization, user_id=user_id)
    return end_user
