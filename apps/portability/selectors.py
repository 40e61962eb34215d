"""Reads of export requests, always within the caller's organisation. Who may be exported is who may be erased
(apps.privacy.selectors): a person's data is theirs in the whole organisation."""

from apps.portability.models import ExportRequest


def export_list(*, client):
    """An export is the requesting client's alone: its archive holds data of every scope."""
    return ExportRequest.objects.filter(organization_id=client.organization_id, requested_by=client)
