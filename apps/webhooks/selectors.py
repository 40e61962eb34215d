"""Reads of webhook endpoints and deliveries, always within the caller's organisation."""

from apps.webhooks.models import WebhookDelivery, WebhookEndpoint


def endpoint_list(*, organization_id):
    """They receive events of every scope, so they belong to the organisation, not to a scope."""
    return WebhookEndpoint.objects.filter(organization_id=organization_id)


def delivery_list(*, endpoint: WebhookEndpoint):
    return WebhookDelivery.objects.filter(organization_id=endpoint.organization_id, endpoint=endpoint)
