"""Reads for OAuth: the platform client a bearer token acts as, and the clients a staff member may
approve an application for."""

import hashlib

from django.db import DEFAULT_DB_ALIAS
from oauth2_provider.models import AccessToken
from rest_framework import exceptions

from apps.tenancy.models import Client
from apps.tenancy.selectors import organization_for_staff

SCOPE = "mcp"  # the one OAuth scope: the MCP tools, as the bound client


class InvalidToken(exceptions.AuthenticationFailed):
    """An OAuth bearer token that does not authenticate (RFC 6750 `invalid_token`)."""


def clients_for_approver(*, user):
    """Every organisation's active clients for a superuser, their own organisation's for staff."""
    clients = Client.objects.filter(status=Client.Status.ACTIVE).select_related("organization")
    if not (user.is_active and user.is_staff):
        return clients.none()
    if user.is_superuser:
        return clients
    organization = organization_for_staff(user=user)
    return clients.filter(organization=organization) if organization else clients.none()


def client_for_access_token(*, raw_token: str, resource: str) -> Client:
    """Read from the primary on every request (no cache): a revoked token, a deleted binding or a
    disabled client is refused from the commit on."""
    token = (
        AccessToken.objects.using(DEFAULT_DB_ALIAS)
        .select_related("application__platform_binding__client__organization")
        .filter(token_checksum=hashlib.sha256(raw_token.encode()).hexdigest())
        .first()
    )
    if token is None or token.is_expired():
        raise InvalidToken("The access token is invalid, expired or revoked.")
    if not token.allow_scopes([SCOPE]) or not token.allows_audience(resource):
        raise InvalidToken(f"The access token was not issued for this MCP endpoint (scope '{SCOPE}', {resource}).")
    binding = getattr(token.application, "platform_binding", None) if token.application else None
    if binding is None:
        raise InvalidToken("The access token's application is not bound to a platform client.")
    if not binding.client.is_active:
        raise InvalidToken("This client is disabled.")
    return binding.client
