"""Writes of webhooks: endpoints, the deliveries an event creates, and one delivery attempt."""

import json
import logging
import os
import threading
import time
import uuid
from datetime import timedelta

import httpx2
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.core.events import Event
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue
from apps.webhooks.models import TEST_EVENT, WebhookDelivery, WebhookEndpoint
from apps.webhooks.signing import secret_generate, signed_headers

logger = logging.getLogger(__name__)

DELIVER_WEBHOOK = "deliver_webhook"
# Statuses worth another attempt besides 5xx: the receiver asked us to slow down or timed out.
RETRYABLE_STATUSES = (408, 429)


class DeliveryFailed(Exception):
    """Worth retrying; the message names a status code or an exception type, never what the receiver answered."""


def endpoint_create(
    *, organization, registered_by, url: str, events: list[str], include_content: bool = False, description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """The secret is returned once; the caller shows it once."""
    endpoint = WebhookEndpoint.objects.create(
        organization=organization,
        registered_by=registered_by,
        url=url,
        events=sorted(set(events)),
        include_content=include_content,
        description=description,
        secret=secret_generate(),
    )
    return endpoint, endpoint.secret


def endpoint_update(*, endpoint: WebhookEndpoint, changes: dict) -> WebhookEndpoint:
    """Setting `active` back on forgets its failures."""
    for name in ("url", "description", "include_content"):
        if name in changes:
            setattr(endpoint, name, changes[name])
    if "events" in changes:
        endpoint.events = sorted(set(changes["events"]))
    if "active" in changes and changes["active"] != endpoint.active:
        endpoint.active = changes["active"]
        if endpoint.active:
            endpoint.consecutive_failures, endpoint.disabled_at, endpoint.disabled_reason = 0, None, ""
        else:
            endpoint.disabled_at, endpoint.disabled_reason = timezone.now(), "Disabled by a client."
    endpoint.save()
    return endpoint


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Its deliveries still queued find nothing and stop."""
    endpoint.delete()


def event_payload(event: Event, *, include_content: bool) -> dict:
    data = dict(event.data)
    if include_content and event.content:
        data["content"] = event.content
    return {
        "id": event.id,
        "type": event.type,
        "timestamp": event.occurred_at.isoformat(),
        "organization_id": str(event.organization_id),
        "data": data,
    }


def delivery_enqueue(*, endpoint: WebhookEndpoint, event: Event) -> WebhookDelivery:
    """In the caller's transaction (the task is published on commit)."""
    delivery_id = uuid.uuid4()
    task = enqueue(
        DELIVER_WEBHOOK,
        {"delivery": str(delivery_id)},
        organization=endpoint.organization,
        max_attempts=settings.WEBHOOK_MAX_ATTEMPTS,
        priority=MemoryTask.Priority.URGENT,
    )
    return WebhookDelivery.objects.create(
        id=delivery_id,
        organization_id=endpoint.organization_id,
        endpoint=endpoint,
        event_type=event.type,
        event_id=event.id,
        payload=event_payload(event, include_content=endpoint.include_content),
        task_id=task.pk,
    )


def event_deliveries_create(event: Event) -> list[WebhookDelivery]:
    """The event listener, in the emitter's transaction."""
    endpoints = WebhookEndpoint.objects.filter(
        organization_id=event.organization_id, active=True, events__contains=[event.type]
    ).select_related("organization")
    return [delivery_enqueue(endpoint=endpoint, event=event) for endpoint in endpoints]


@transaction.atomic
def endpoint_send_test(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    event = Event(type=TEST_EVENT, organization_id=endpoint.organization_id, data={"endpoint_id": str(endpoint.pk)})
    return delivery_enqueue(endpoint=endpoint, event=event)


# One connection pool per thread and process: a forked worker must not share its parent's sockets.
_clients = threading.local()


def _http() -> httpx2.Client:
    if getattr(_clients, "pid", None) != os.getpid():
        _clients.client = httpx2.Client(follow_redirects=False, headers={"User-Agent": "memory-platform-webhooks"})
        _clients.pid = os.getpid()
    return _clients.client


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(status code or None, error without content)."""
    body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        **signed_headers(
            secret=delivery.endpoint.secret, message_id=delivery.event_id, timestamp=int(time.time()), body=body
        ),
    }
    try:
        response = _http().post(
            delivery.endpoint.url, content=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS
        )
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        return None, type(exc).__name__
    response.close()
    return response.status_code, "" if response.is_success else f"HTTP {response.status_code}"


def _endpoint_failed(endpoint: WebhookEndpoint) -> None:
    """At WEBHOOK_DISABLE_AFTER_FAILURES in a row the endpoint is disabled; its waiting deliveries then cancel."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=F("consecutive_failures") + 1, updated_at=timezone.now()
    )
    limit = settings.WEBHOOK_DISABLE_AFTER_FAILURES
    disabled = WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True, consecutive_failures__gte=limit).update(
        active=False,
        disabled_at=timezone.now(),
        disabled_reason=f"Disabled after {limit} failed deliveries in a row.",
        updated_at=timezone.now(),
    )
    if disabled:
        logger.warning("webhook endpoint %s disabled after %s failed deliveries in a row", endpoint.pk, limit)


def delivery_run(*, delivery_id, final: bool) -> dict:
    """A retryable failure raises DeliveryFailed so the pipeline backs off; any other, or a `final` one, fails it."""
    delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None:  # its endpoint was deleted
        return {"status": "gone"}
    if delivery.status != WebhookDelivery.Status.PENDING:
        return {"status": delivery.status}
    endpoint = delivery.endpoint
    deliveries = WebhookDelivery.objects.filter(pk=delivery.pk)
    if not endpoint.active:
        deliveries.update(status=WebhookDelivery.Status.CANCELLED, updated_at=timezone.now())
        return {"status": WebhookDelivery.Status.CANCELLED}
    status_code, error = _post(delivery)
    now = timezone.now()
    attempt = {"attempts": F("attempts") + 1, "last_status_code": status_code, "last_error": error}
    attempt.update(last_attempt_at=now, updated_at=now)
    if not error:
        deliveries.update(**attempt, status=WebhookDelivery.Status.SUCCEEDED, delivered_at=now)
        WebhookEndpoint.objects.filter(pk=endpoint.pk, consecutive_failures__gt=0).update(
            consecutive_failures=0, updated_at=now
        )
        return {"status": WebhookDelivery.Status.SUCCEEDED, "status_code": status_code}
    retryable = status_code is None or status_code >= 500 or status_code in RETRYABLE_STATUSES
    if retryable and not final:
        deliveries.update(**attempt)
        raise DeliveryFailed(error)
    deliveries.update(**attempt, status=WebhookDelivery.Status.FAILED)
    _endpoint_failed(endpoint)
    if retryable:  # out of attempts: the task ends dead, like any task that ran out
        raise DeliveryFailed(error)
    return {"status": WebhookDelivery.Status.FAILED, "status_code": status_code}


# Where a payload names an end user or a client: the data key holding its id, and the keys saying it is one.
SUBJECT_KEYS = {
    "user": [("user_id", {}), ("subject_id", {"subject_kind": "user"}), ("value", {"selection": "user"})],
    "client": [("subject_id", {"subject_kind": "client"}), ("value", {"selection": "client"})],
}


def purge_deliveries(subject, erasure_id) -> dict:
    """Deliveries naming the erased end user or client go, sent or not."""
    named = Q()
    for key, kind in SUBJECT_KEYS[subject.kind]:
        named |= Q(**{f"payload__data__{name}": value for name, value in {key: subject.subject_id, **kind}.items()})
    deleted, _ = WebhookDelivery.objects.filter(named, organization=subject.organization).delete()
    return {"webhooks.WebhookDelivery": deleted}


def deliveries_prune() -> int:
    """Finished deliveries older than WEBHOOK_DELIVERY_RETENTION_DAYS go; pending ones stay."""
    cutoff = timezone.now() - timedelta(days=settings.WEBHOOK_DELIVERY_RETENTION_DAYS)
    deleted, _ = (
        WebhookDelivery.objects.exclude(status=WebhookDelivery.Status.PENDING).filter(updated_at__lt=cutoff).delete()
    )
    return deleted
