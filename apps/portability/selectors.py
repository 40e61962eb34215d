"""Reads of export requests and of what may be exported, always within the caller's organisation."""

from apps.portability.models import ExportRequest
from apps.tenancy.models import Client, EndUser


def export_list(*, client):
    """An export is the requesting client's alone: its archive holds data of every scope."""
    return ExportRequest.objects.filter(organization_id=client.organization_id, requested_by=client)


def exportable_users(*, client):
    """A person's data is theirs in the whole organisation, as for erasure."""
    return EndUser.objects.filter(organization_id=client.organization_id)


def exportable_clients(*, client):
    return Client.objects.filter(organization_id=client.organization_id)
