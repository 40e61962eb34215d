"""The webhook endpoints' operations (REST: apps.webhooks.views).
An endpoint receives events of every scope, so every client with can_manage_webhooks sees all of them."""

from apps.core.operations import Access, check_ids, get_or_404, object_body, operation, validated
from apps.core.pagination import Page, paginate
from apps.webhooks import serializers
from apps.webhooks.selectors import delivery_list, endpoint_list
from apps.webhooks.services import endpoint_create, endpoint_delete, endpoint_send_test, endpoint_update


def _endpoint(client, webhook_id: str):
    check_ids(webhook_id=webhook_id)
    return get_or_404(endpoint_list(organization_id=client.organization_id), pk=webhook_id)


@operation(access=Access.WEBHOOKS)
def list_webhooks(*, client, query) -> Page:
    """List the organisation's webhook endpoints (never their secrets)."""
    filters = validated(serializers.WebhookListFilterSerializer, query)
    endpoints = endpoint_list(organization_id=client.organization_id)
    if "active" in filters:
        endpoints = endpoints.filter(active=filters["active"])
    return paginate(endpoints, filters=filters, serializer_class=serializers.WebhookOutputSerializer)


@operation(access=Access.WEBHOOKS)
def create_webhook(*, client, data) -> dict:
    """Register an endpoint to receive the organisation's events.

    The answer carries the endpoint's signing secret, shown this once: every delivery is signed with
    it (Standard Webhooks `webhook-signature`)."""
    data = validated(serializers.WebhookCreateInputSerializer, data)
    endpoint, secret = endpoint_create(organization=client.organization, registered_by=client, **data)
    return serializers.WebhookCreatedOutputSerializer(
        {**serializers.WebhookOutputSerializer(endpoint).data, "secret": secret}
    ).data


@operation(access=Access.WEBHOOKS)
def get_webhook(*, client, webhook_id: str) -> dict:
    """Read an endpoint: its events, whether it is active, its failures in a row and why it was disabled."""
    return serializers.WebhookOutputSerializer(_endpoint(client, webhook_id)).data


@operation(access=Access.WEBHOOKS)
def update_webhook(*, client, webhook_id: str, data) -> dict:
    """Change an endpoint's URL, events, content opt-in or description, or switch it off and on.

    Switching a disabled endpoint back on (`active: true`) resets its failures in a row."""
    data = validated(serializers.WebhookPatchInputSerializer, object_body(data))
    return serializers.WebhookOutputSerializer(
        endpoint_update(endpoint=_endpoint(client, webhook_id), changes=data)
    ).data


@operation(access=Access.WEBHOOKS)
def delete_webhook(*, client, webhook_id: str) -> None:
    """Delete an endpoint with its delivery log; deliveries still waiting are dropped."""
    endpoint_delete(endpoint=_endpoint(client, webhook_id))


@operation(access=Access.WEBHOOKS)
def list_webhook_deliveries(*, client, webhook_id: str, query) -> Page:
    """List an endpoint's deliveries, newest first: payload, attempts, status and last error."""
    endpoint = _endpoint(client, webhook_id)
    filters = validated(serializers.DeliveryListFilterSerializer, query)
    deliveries = delivery_list(endpoint=endpoint)
    if "status" in filters:
        deliveries = deliveries.filter(status=filters["status"])
    return paginate(deliveries, filters=filters, serializer_class=serializers.DeliveryOutputSerializer)


@operation(access=Access.WEBHOOKS)
def test_webhook(*, client, webhook_id: str) -> dict:
    """Send the endpoint a `webhook.test` event (signed and retried like any other).

    Answers 202 with the delivery; follow it in GET webhooks/<id>/deliveries."""
    return serializers.DeliveryOutputSerializer(endpoint_send_test(endpoint=_endpoint(client, webhook_id))).data
