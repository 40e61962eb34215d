"""Reads of privacy data and of erasure subjects, always within the caller's organisation."""

from apps.privacy.models import ErasureRequest
from apps.tenancy.models import Client, EndUser


def erasure_list(*, client):
    """Erasures the client may see: those it requested and, if it may erase itself, every erasure of
    its organisation. An erasure spans every scope and names its subject (an end user or client of
    any scope), so reading a scope is not enough to see one; staff see them all in the admin."""
    queryset = ErasureRequest.objects.filter(organization_id=client.organization_id)
    if client.can_erase:
        return queryset
    return queryset.filter(requested_by=client)


def erasable_users(*, client):
    """A user erasure covers the person's data in the whole organisation, not only the caller's
    read scopes: the right to erasure is the person's, and the organisation is the controller."""
    return EndUser.objects.filter(organization_id=client.organization_id)


def erasable_clients(*, client):
    return Client.objects.filter(organization_id=client.organization_id)
