"""Input and output shapes of the webhook endpoints (one set per endpoint)."""

import httpx2
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.events import EVENT_TYPES
from apps.core.pagination import PageQuerySerializer
from apps.webhooks.egress import url_refusal
from apps.webhooks.models import WebhookDelivery

URL_MAX_LENGTH = 2000


def http_url(value: str) -> None:
    """Parsed as the delivering HTTP client parses it, so a URL the API accepts is one a delivery can reach;
    aimed at an address deliveries may not reach, refused now (and at every connection: apps.webhooks.egress)."""
    try:
        url = httpx2.URL(value)
    except httpx2.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host or any(c.isspace() for c in value):
        raise serializers.ValidationError("Enter a valid http or https URL (with a host, without spaces).")
    if refusal := url_refusal(value):
        raise serializers.ValidationError(refusal)


@extend_schema_field({"type": "string", "format": "uri", "pattern": "^https?://[^/?#\\s]", "maxLength": URL_MAX_LENGTH})
class UrlField(fields.CharField):
    pass


def _url(**kwargs):
    return UrlField(
        max_length=URL_MAX_LENGTH,
        validators=[http_url],
        help_text="Where events are POSTed: an http or https URL.",
        **kwargs,
    )


def _events(**kwargs):
    return serializers.ListField(
        child=fields.ChoiceField(choices=EVENT_TYPES),
        min_length=1,
        max_length=len(EVENT_TYPES),
        help_text="The event types to deliver: " + ", ".join(f"`{name}`" for name in EVENT_TYPES) + ".",
        **kwargs,
    )


def _include_content(**kwargs):
    return fields.StrictBooleanField(
        help_text="Payloads also carry what the event is about (a skill's name and text); off: ids only.", **kwargs
    )


class WebhookCreateInputSerializer(InputSerializer):
    url = _url()
    events = _events()
    include_content = _include_content(required=False, default=False)
    description = fields.CharField(max_length=200, required=False, allow_blank=True, default="")


class WebhookPatchInputSerializer(InputSerializer):
    """The fields to change. `active: true` re-enables an endpoint disabled after failures."""

    url = _url(required=False)
    events = _events(required=False)
    include_content = _include_content(required=False)
    description = fields.CharField(max_length=200, required=False, allow_blank=True)
    active = fields.StrictBooleanField(required=False, help_text="Off: nothing is delivered to the endpoint.")


class WebhookListFilterSerializer(PageQuerySerializer):
    active = fields.StrictBooleanField(required=False)


class WebhookOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    description = serializers.CharField()
    events = serializers.ListField(child=serializers.CharField())
    include_content = serializers.BooleanField()
    active = serializers.BooleanField()
    consecutive_failures = serializers.IntegerField()
    disabled_at = serializers.DateTimeField(allow_null=True)
    disabled_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WebhookCreatedOutputSerializer(WebhookOutputSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (`whsec_…`), shown only in this answer: store it to verify deliveries."
    )


class DeliveryListFilterSerializer(PageQuerySerializer):
    status = fields.ChoiceField(choices=WebhookDelivery.Status.choices, required=False)


class DeliveryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    endpoint_id = serializers.UUIDField()
    event_type = serializers.CharField()
    event_id = serializers.CharField()
    payload = serializers.JSONField(
        help_text="The JSON body POSTed to the endpoint, without `data.content`: an endpoint that opted in gets "
        "the content rendered from the current rows at each attempt, and the log never keeps it."
    )
    status = serializers.ChoiceField(choices=WebhookDelivery.Status.choices)
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField(
        help_text="`HTTP <status>`, `No HTTP answer` (connection failed, not HTTP, or past the deadline) or "
        "`Refused: the URL's address is not allowed`; never a body."
    )
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)
    task_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
