"""Where deliveries may go (apps.webhooks.egress): every spelling of an internal address refused at
registration and again at connect time, the operator's allow-list, userinfo, redirects, one generic
error per kind of failure; and how long and how much an attempt may take. Receivers are real
listeners on 127.0.0.1 started by the tests."""

import contextlib
import socket

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from apps.webhooks.models import WebhookDelivery, WebhookEndpoint
from apps.webhooks.services import (
    ERROR_NO_ANSWER,
    ERROR_REFUSED,
    DeliveryFailed,
    delivery_run,
    endpoint_create,
    endpoint_send_test,
)
from harness.webhook_receiver import (
    INTERNAL_SPELLINGS,
    LOOPBACK_SPELLINGS,
    RawListener,
    Receiver,
    huge_body,
    not_http,
    status_only,
    trickle_body,
    trickle_headers,
)
from tests.conftest import api_for

pytestmark = pytest.mark.django_db


def _deliver(endpoint) -> WebhookDelivery:
    """One attempt, the last one (a retryable failure raises DeliveryFailed for the pipeline: not here)."""
    delivery = endpoint_send_test(endpoint=endpoint)
    with contextlib.suppress(DeliveryFailed):
        delivery_run(delivery_id=delivery.pk, final=True)
    delivery.refresh_from_db()
    return delivery


def _stored_endpoint(client, url: str):
    """A row as an older release (or a name re-pointed since) left it: the service does not validate."""
    endpoint, _ = endpoint_create(
        organization=client.organization, registered_by=client, url=url, events=["skill.evolved"]
    )
    return endpoint


@pytest.mark.parametrize("spelling", INTERNAL_SPELLINGS)
def test_an_internal_address_is_refused_at_registration_in_every_spelling(manager, spelling):
    url = "http://" + spelling.format(port=8080) + "/hook"
    response = api_for(manager).post("/api/v1/webhooks/", {"url": url, "events": ["skill.evolved"]}, format="json")
    assert response.status_code == 400, (url, response.content)
    # A spelling the URL parser refuses (an octal quad) is not a valid URL; any other names the allow-list.
    message = response.json()["error"]["details"]["url"][0]
    assert "WEBHOOK_ALLOWED_NETWORKS" in message or "valid http or https URL" in message


def test_no_spelling_of_an_internal_address_is_reached_at_connect_time(manager, settings):
    settings.WEBHOOK_TEST_SENDS_PER_MINUTE = settings.WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION = 0
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        deliveries = {
            spelling: _deliver(_stored_endpoint(manager, "http://" + spelling.format(port=port) + "/hook"))
            for spelling in INTERNAL_SPELLINGS
        }
    assert receiver.requests == 0
    assert {spelling: (d.status, d.last_error) for spelling, d in deliveries.items()} == dict.fromkeys(
        INTERNAL_SPELLINGS, ("failed", ERROR_REFUSED)
    )


def test_the_operators_allow_list_lets_the_loopback_spellings_through(manager, settings):
    """The control of the test above: the same listener is reached once its network is allowed."""
    settings.WEBHOOK_TEST_SENDS_PER_MINUTE = settings.WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION = 0
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
    # The spellings of 127.0.0.1 itself, where the listener is (not 127.0.0.2, IPv6, or the octal quad
    # the URL parser refuses).
    ipv4 = [
        spelling
        for spelling in LOOPBACK_SPELLINGS
        if "[" not in spelling and not spelling.startswith(("0", "127.0.0.2"))
    ]
    with Receiver() as receiver:
        port = receiver.server.server_address[1]
        statuses = {
            spelling: _deliver(_stored_endpoint(manager, "http://" + spelling.format(port=port) + "/hook")).status
            for spelling in ipv4
        }
    assert statuses == dict.fromkeys(ipv4, "succeeded") and receiver.requests == len(ipv4)


def test_a_check_at_registration_does_not_excuse_the_connection(manager, settings):
    """An endpoint registered while its address was allowed (or whose name resolved elsewhere then, as DNS
    rebinding does) is checked again at every connection."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with Receiver() as receiver:
        created = api_for(manager).post(
            "/api/v1/webhooks/", {"url": receiver.url, "events": ["skill.evolved"]}, format="json"
        )
        assert created.status_code == 201
        settings.WEBHOOK_ALLOWED_NETWORKS = []
        delivery = _deliver(WebhookEndpoint.objects.get(pk=created.json()["id"]))
    assert (delivery.status, delivery.last_error, receiver.requests) == ("failed", ERROR_REFUSED, 0)


def test_userinfo_is_refused_and_never_becomes_an_authorization_header(manager, allow_loopback):
    with Receiver() as receiver:
        url = receiver.url.replace("http://", "http://admin:secret@")
        response = api_for(manager).post("/api/v1/webhooks/", {"url": url, "events": ["skill.evolved"]}, format="json")
        assert response.status_code == 400 and "user name or password" in response.json()["error"]["details"]["url"][0]
        delivery = _deliver(_stored_endpoint(manager, url))
    assert (delivery.status, delivery.last_error, receiver.requests) == ("failed", ERROR_REFUSED, 0)


def test_redirects_are_not_followed(manager, allow_loopback):
    with Receiver() as target:
        with RawListener(status_only(302, f"Location: {target.url}\r\n")) as redirecting:
            delivery = _deliver(_stored_endpoint(manager, redirecting.url))
    assert (delivery.status, delivery.last_error, target.requests) == ("failed", "HTTP 302", 0)


def test_a_closed_port_a_service_that_is_not_http_and_a_stalled_answer_look_the_same(manager, allow_loopback, settings):
    """The log is no port scanner: whatever kept an HTTP answer from coming, it says `No HTTP answer`."""
    settings.WEBHOOK_TIMEOUT_SECONDS = 1.0
    settings.WEBHOOK_TEST_SENDS_PER_MINUTE = 0
    with RawListener(not_http) as banner, RawListener(trickle_headers()) as stalled:
        closed = socket.create_server(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}/hook"
        closed.close()
        errors = {
            name: (delivery.last_status_code, delivery.last_error)
            for name, url in (("closed", closed_url), ("banner", banner.url), ("stalled", stalled.url))
            for delivery in [_deliver(_stored_endpoint(manager, url))]
        }
    assert errors == dict.fromkeys(["closed", "banner", "stalled"], (None, ERROR_NO_ANSWER))


def test_an_attempt_ends_at_its_deadline_however_slowly_the_receiver_trickles(manager, allow_loopback, settings):
    """httpx's timeouts bound each read; a byte every 0.1 s never trips one. The deadline bounds the
    attempt: the trickler is hung up on long before its 30 s (300 bytes) are out."""
    settings.WEBHOOK_TIMEOUT_SECONDS = 1.0
    with RawListener(trickle_headers(interval=0.1, seconds=30)) as trickler:
        delivery = _deliver(_stored_endpoint(manager, trickler.url))
        trickler.stopping.wait(0.5)  # the hang-up reaches the trickler at its next byte
    assert (delivery.status, delivery.last_error) == ("failed", ERROR_NO_ANSWER)
    assert trickler.hung_up == 1 and trickler.sent[0] < 100


def test_a_trickled_body_after_a_2xx_is_a_success_cut_at_the_deadline(manager, allow_loopback, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1.0
    with RawListener(trickle_body(interval=0.1, seconds=30)) as trickler:
        delivery = _deliver(_stored_endpoint(manager, trickler.url))
        trickler.stopping.wait(0.5)
    assert (delivery.status, delivery.last_status_code) == ("succeeded", 200)
    assert trickler.hung_up == 1 and trickler.sent[0] < 200


def test_a_huge_answer_is_not_read_past_the_cap(manager, allow_loopback, settings):
    with RawListener(huge_body(megabytes=96)) as huge:
        delivery = _deliver(_stored_endpoint(manager, huge.url))
        huge.stopping.wait(0.5)
    assert (delivery.status, delivery.last_status_code) == ("succeeded", 200)
    # Socket buffers take a few megabytes the client never reads; the 96 MB are never sent.
    assert huge.hung_up == 1 and huge.sent[0] < 16 * 1024 * 1024


def test_a_malformed_allow_list_is_refused_at_start(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8", "not-a-network"]
    with pytest.raises(SystemCheckError, match="WEBHOOK_ALLOWED_NETWORKS: 'not-a-network' is not a network"):
        call_command("check")
