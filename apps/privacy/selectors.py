"""Reads of privacy data and of erasure subjects, always within the caller's organisation."""

from apps.privacy.models import ErasureRequest
from apps.tenancy.models import Client, EndUser


def erasure_list(*, client):
    return ErasureRequest.objects.filter(organization_id=client.organization_id)


def erasable_users(*, client):
    """A user erasure covers the person's data in the whole organisation, not only the caller's
    read scopes: the right to erasure is the person's, and the organisation is the controller."""
    return EndUser.objects.filter(organization_id=client.organization_id)


def erasable_clients(*, client):
    return Client.objects.filter(organization_id=client.organization_id)
