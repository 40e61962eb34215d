"""Writes of webhooks: endpoints, the deliveries an event creates, and one delivery attempt."""

import json
import logging
import os
import threading
import time
import uuid
from datetime import timedelta

import httpcore2
import httpx2
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from rest_framework import exceptions

from apps.core.errors import ConflictError
from apps.core.events import CONTENT_RENDERERS, Event, event_content
from apps.pipeline.locks import advisory_xact_lock
from apps.pipeline.services import enqueue
from apps.webhooks import egress
from apps.webhooks.models import TEST_EVENT, WebhookDelivery, WebhookEndpoint
from apps.webhooks.signing import secret_generate, signed_headers

logger = logging.getLogger(__name__)

DELIVER_WEBHOOK = "deliver_webhook"
# The Celery queue deliveries are published to: only workers started with `-Q webhooks` run them.
WEBHOOK_QUEUE = "webhooks"
# Statuses worth another attempt besides 5xx: the receiver asked us to slow down or timed out.
RETRYABLE_STATUSES = (408, 429)
# The delivery log's errors. One for every address refused, whatever its port or path, given before any
# connection; one for every attempt that got no HTTP answer (refused or reset connection, a service that
# does not speak HTTP, TLS failure, the deadline): the log is no scanner. The worker's log names the class.
ERROR_REFUSED = "Refused: the URL's address is not allowed"
ERROR_NO_ANSWER = "No HTTP answer"
NO_ANSWER_ERRORS = (
    httpcore2.TimeoutException,
    httpcore2.NetworkError,
    httpcore2.ProtocolError,
    httpcore2.UnsupportedProtocol,
    OSError,
)


class DeliveryFailed(Exception):
    """Worth retrying; the message names a status code or the generic error, never what the receiver answered."""


class TooManyTestSends(exceptions.Throttled):
    default_code = "rate_limited"

    def __init__(self, *, limit: int, wait: float):
        super().__init__(
            wait=wait,
            detail=f"Too many test events: an organisation may send {limit} per minute (WEBHOOK_TEST_SENDS_PER_MINUTE).",
            code="rate_limited",
        )
        self.error_details = {"limit": f"{limit}/minute", "retry_after_seconds": self.wait}


@transaction.atomic
def endpoint_create(
    *, organization, registered_by, url: str, events: list[str], include_content: bool = False, description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """The secret is returned once; the caller shows it once. At most WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION."""
    limit = settings.WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION
    # Counted under a lock of the organisation's endpoints, so two requests cannot both take the last place.
    advisory_xact_lock(f"webhooks:endpoints:{organization.pk}")
    if limit and WebhookEndpoint.objects.filter(organization=organization).count() >= limit:
        raise ConflictError(
            f"This organisation already has {limit} webhook endpoints, the most it may have "
            "(WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION); delete one first.",
            code="limit_reached",
            details={"limit": limit},
        )
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


def event_payload(event: Event) -> dict:
    """What the delivery log keeps: ids and small facts, never content (delivery_body adds it at send time)."""
    return {
        "id": event.id,
        "type": event.type,
        "timestamp": event.occurred_at.isoformat(),
        "organization_id": str(event.organization_id),
        "data": dict(event.data),
    }


def delivery_body(delivery: WebhookDelivery) -> bytes:
    """The JSON POSTed: the stored payload, and for an endpoint that opted in, `data.content` rendered from the
    current rows (null once they are gone), so the log never holds a copy an erasure would have to find."""
    payload = delivery.payload
    if delivery.endpoint.include_content and delivery.event_type in CONTENT_RENDERERS:
        content = event_content(delivery.event_type, organization_id=delivery.organization_id, data=payload["data"])
        payload = {**payload, "data": {**payload["data"], "content": content}}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def delivery_enqueue(*, endpoint: WebhookEndpoint, event: Event) -> WebhookDelivery:
    """In the caller's transaction (the task is published on commit)."""
    delivery_id = uuid.uuid4()
    task = enqueue(
        DELIVER_WEBHOOK,
        {"delivery": str(delivery_id)},
        organization=endpoint.organization,
        max_attempts=settings.WEBHOOK_MAX_ATTEMPTS,
    )
    return WebhookDelivery.objects.create(
        id=delivery_id,
        organization_id=endpoint.organization_id,
        endpoint=endpoint,
        event_type=event.type,
        event_id=event.id,
        payload=event_payload(event),
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
    """At most WEBHOOK_TEST_SENDS_PER_MINUTE per organisation (TooManyTestSends, a 429, beyond)."""
    limit = settings.WEBHOOK_TEST_SENDS_PER_MINUTE
    if limit:
        advisory_xact_lock(f"webhooks:test-sends:{endpoint.organization_id}")
        now = timezone.now()
        recent = list(
            WebhookDelivery.objects.filter(
                organization_id=endpoint.organization_id,
                event_type=TEST_EVENT,
                created_at__gte=now - timedelta(minutes=1),
            )
            .order_by("-created_at")
            .values_list("created_at", flat=True)[:limit]
        )
        if len(recent) >= limit:
            wait = (recent[-1] + timedelta(minutes=1) - now).total_seconds()
            raise TooManyTestSends(limit=limit, wait=max(1.0, wait))
    event = Event(type=TEST_EVENT, organization_id=endpoint.organization_id, data={"endpoint_id": str(endpoint.pk)})
    return delivery_enqueue(endpoint=endpoint, event=event)


# One connection pool per thread and process: a forked worker must not share its parent's sockets. Its
# connections are made by egress.GuardedBackend (checked addresses, one deadline per attempt); no proxy
# from the environment is used, since a proxy would resolve the name where no check sees it.
_pools = threading.local()


def _pool() -> httpcore2.ConnectionPool:
    if getattr(_pools, "pid", None) != os.getpid():
        _pools.pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            network_backend=egress.GuardedBackend(),
            keepalive_expiry=5.0,  # httpx's default; an idle connection is not kept for ever
            retries=0,
        )
        _pools.pid = os.getpid()
    return _pools.pool


def _read_some(response) -> None:
    """Reads the answer's body (which decides nothing) so the connection can serve the next delivery, but
    at most WEBHOOK_MAX_RESPONSE_BYTES and within the deadline; past either, the connection is dropped."""
    read = 0
    try:
        for chunk in response.iter_stream():
            read += len(chunk)
            if read > settings.WEBHOOK_MAX_RESPONSE_BYTES:
                return
    except NO_ANSWER_ERRORS:
        return


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(status code or None, error without content). The whole attempt (name resolution, connect, TLS, request,
    answer) ends within WEBHOOK_TIMEOUT_SECONDS; at most WEBHOOK_MAX_RESPONSE_BYTES of the answer are read."""
    try:
        url = httpx2.URL(delivery.endpoint.url)
    except httpx2.InvalidURL:
        return None, ERROR_REFUSED
    if url.userinfo or url.scheme not in ("http", "https"):  # refused at creation too; older rows may have it
        return None, ERROR_REFUSED
    body = delivery_body(delivery)
    signed = signed_headers(
        secret=delivery.endpoint.secret, message_id=delivery.event_id, timestamp=int(time.time()), body=body
    )
    headers = [
        (b"Host", url.netloc),
        (b"User-Agent", b"memory-platform-webhooks"),
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(body)).encode()),
        *((name.encode(), value.encode()) for name, value in signed.items()),
    ]
    target = httpcore2.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path)
    timeout = settings.WEBHOOK_TIMEOUT_SECONDS
    try:
        with egress.deadline(timeout):
            with _pool().stream(
                "POST",
                target,
                headers=headers,
                content=body,
                extensions={"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}},
            ) as response:
                status = response.status
                _read_some(response)
    except egress.AddressRefused:
        logger.info("webhook delivery %s refused: its endpoint's address is not allowed", delivery.pk)
        return None, ERROR_REFUSED
    except NO_ANSWER_ERRORS as exc:
        logger.info("webhook delivery %s got no HTTP answer (%s)", delivery.pk, type(exc).__name__)
        return None, ERROR_NO_ANSWER
    return status, "" if 200 <= status < 300 else f"HTTP {status}"


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
    retryable = error == ERROR_NO_ANSWER or (status_code or 0) >= 500 or status_code in RETRYABLE_STATUSES
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
