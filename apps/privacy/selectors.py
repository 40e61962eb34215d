"""Reads of privacy data and of erasure subjects, always within the caller's organisation."""

from apps.privacy.models import ErasureRequest
from apps.tenancy.models import Client, EndUser


def erasure_list(*, client):
    """An erasure spans every scope and names its subject, so only its requester and can_erase see it."""
    queryset = ErasureRequest.objects.filter(organization_id=client.organization_id)
    return queryset if client.can_erase else queryset.filter(requested_by=client)


def erasable_users(*, client):
    """The whole organisation, not the caller's read scopes: the right to erasure is the person's."""
    return EndUser.objects.filter(organization_id=client.organization_id)


def erasable_clients(*, client):
    return Client.objects.filter(organization_id=client.organization_id)
