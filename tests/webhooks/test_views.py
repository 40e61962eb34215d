"""The REST API of webhook endpoints: who may manage them, validation, the secret shown once, the
delivery log, and a test event delivered by a real worker."""

import time

import pytest
from celery.contrib.testing.worker import start_worker

from apps.webhooks.models import WebhookEndpoint
from harness.webhook_receiver import Receiver
from memory_platform.celery import app
from tests.conftest import api_for
from tests.factories import ClientFactory

BODY = {"url": "https://hooks.example.com/memory", "events": ["skill.evolved", "erasure.finished"]}


@pytest.mark.django_db
def test_the_secret_is_shown_once_and_never_again(manager):
    api = api_for(manager)
    created = api.post("/api/v1/webhooks/", BODY, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["include_content"] is False and body["active"] is True
    assert body["events"] == ["erasure.finished", "skill.evolved"]
    read = api.get(f"/api/v1/webhooks/{body['id']}/").json()
    listed = api.get("/api/v1/webhooks/").json()
    assert "secret" not in read and listed["count"] == 1 and "secret" not in listed["results"][0]
    assert WebhookEndpoint.objects.get(pk=body["id"]).secret == body["secret"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "ftp://hooks.example.com/x"}, "url"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": "https://"}, "url"),
        ({"url": "https://hooks.example.com/a b"}, "url"),
        ({"url": "https://[::1/x"}, "url"),
        ({"url": "http://127.0.0.1:8000/admin/"}, "url"),
        ({"url": "http://169.254.169.254/latest/meta-data/"}, "url"),
        ({"url": "https://user:password@hooks.example.com/memory"}, "url"),
        ({"events": ["skill.deleted"]}, "events"),
        ({"events": []}, "events"),
        ({"include_content": "yes"}, "include_content"),
        ({"organization": "x"}, "organization"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(manager, change, field):
    response = api_for(manager).post("/api/v1/webhooks/", {**BODY, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_clients_without_the_permission_are_refused_before_any_lookup(manager, client_a):
    endpoint_id = api_for(manager).post("/api/v1/webhooks/", BODY, format="json").json()["id"]
    api = api_for(client_a)
    refused = api.get(f"/api/v1/webhooks/{endpoint_id}/")
    assert refused.status_code == 403 and "can_manage_webhooks" in refused.json()["error"]["message"]
    assert api.get("/api/v1/webhooks/00000000-0000-4000-8000-000000000000/").content == refused.content
    assert api.post("/api/v1/webhooks/", BODY, format="json").status_code == 403
    assert api.get("/api/v1/webhooks/").status_code == 403


@pytest.mark.django_db
def test_another_organisations_endpoint_is_a_404(manager):
    endpoint_id = api_for(manager).post("/api/v1/webhooks/", BODY, format="json").json()["id"]
    foreign = api_for(ClientFactory(name="foreign", can_manage_webhooks=True))
    for method, suffix in (("get", "/"), ("patch", "/"), ("delete", "/"), ("get", "/deliveries"), ("post", "/test")):
        response = getattr(foreign, method)(f"/api/v1/webhooks/{endpoint_id}{suffix}", {}, format="json")
        missing = getattr(foreign, method)(
            f"/api/v1/webhooks/00000000-0000-4000-8000-000000000000{suffix}", {}, format="json"
        )
        assert response.status_code == 404 and response.content == missing.content
    assert foreign.get("/api/v1/webhooks/").json()["count"] == 0
    assert WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).exists()


@pytest.mark.django_db
def test_patch_changes_only_what_is_sent_and_delete_removes_the_log(manager):
    api = api_for(manager)
    endpoint_id = api.post("/api/v1/webhooks/", BODY, format="json").json()["id"]
    patched = api.patch(f"/api/v1/webhooks/{endpoint_id}/", {"include_content": True, "active": False}, format="json")
    assert patched.status_code == 200
    assert patched.json()["include_content"] is True and patched.json()["active"] is False
    assert patched.json()["url"] == BODY["url"] and patched.json()["disabled_reason"] == "Disabled by a client."
    null = api.generic("PATCH", f"/api/v1/webhooks/{endpoint_id}/", "null", content_type="application/json")
    assert null.status_code == 400
    api.post(f"/api/v1/webhooks/{endpoint_id}/test", format="json")
    assert api.delete(f"/api/v1/webhooks/{endpoint_id}/").status_code == 204
    assert api.get(f"/api/v1/webhooks/{endpoint_id}/").status_code == 404


@pytest.mark.django_db
def test_the_deliveries_list_is_pinned_in_queries(manager, django_assert_max_num_queries):
    api = api_for(manager)
    endpoint_id = api.post("/api/v1/webhooks/", BODY, format="json").json()["id"]
    for _ in range(5):
        assert api.post(f"/api/v1/webhooks/{endpoint_id}/test", format="json").status_code == 202
    with django_assert_max_num_queries(8):
        listed = api.get(f"/api/v1/webhooks/{endpoint_id}/deliveries").json()
    assert listed["count"] == 5 and {item["event_type"] for item in listed["results"]} == {"webhook.test"}
    assert api.get(f"/api/v1/webhooks/{endpoint_id}/deliveries?status=bogus").status_code == 400


@pytest.mark.django_db
def test_an_organisation_may_register_so_many_endpoints_and_is_told_the_limit(manager, settings):
    settings.WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION = 3
    api = api_for(manager)
    for _ in range(3):
        assert api.post("/api/v1/webhooks/", BODY, format="json").status_code == 201
    refused = api.post("/api/v1/webhooks/", BODY, format="json")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "limit_reached" and error["details"] == {"limit": 3}
    assert "WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION" in error["message"]
    other = api_for(ClientFactory(name="other-org", can_manage_webhooks=True))
    assert other.post("/api/v1/webhooks/", BODY, format="json").status_code == 201  # a limit per organisation
    assert WebhookEndpoint.objects.filter(organization=manager.organization).count() == 3


@pytest.mark.django_db
def test_test_events_are_limited_per_organisation_per_minute_with_a_429_naming_the_limit(manager, settings):
    settings.WEBHOOK_TEST_SENDS_PER_MINUTE = 2
    api = api_for(manager)
    first, second = (api.post("/api/v1/webhooks/", BODY, format="json").json()["id"] for _ in range(2))
    assert api.post(f"/api/v1/webhooks/{first}/test", format="json").status_code == 202
    assert api.post(f"/api/v1/webhooks/{second}/test", format="json").status_code == 202
    refused = api.post(f"/api/v1/webhooks/{first}/test", format="json")  # another endpoint, the same organisation
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and error["details"]["limit"] == "2/minute"
    assert "WEBHOOK_TEST_SENDS_PER_MINUTE" in error["message"]
    assert api.get(f"/api/v1/webhooks/{first}/deliveries").json()["count"] == 1


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_test_event_is_delivered_by_a_real_worker_of_the_webhooks_queue(manager, allow_loopback):
    api = api_for(manager)
    with Receiver() as receiver:
        created = api.post("/api/v1/webhooks/", {**BODY, "url": receiver.url}, format="json").json()
        receiver.secret = created["secret"]
        with start_worker(app, pool="solo", queues=["webhooks"], perform_ping_check=False, shutdown_timeout=10):
            delivery = api.post(f"/api/v1/webhooks/{created['id']}/test", format="json").json()
            deadline = time.monotonic() + 60
            while not receiver.received:
                assert time.monotonic() < deadline, "the test event never arrived"
                time.sleep(0.05)
    assert receiver.event_ids() == [delivery["event_id"]] and receiver.refused == 0
    assert receiver.received[0]["payload"]["data"] == {"endpoint_id": created["id"]}
    deadline = time.monotonic() + 10
    while (status := api.get(f"/api/v1/webhooks/{created['id']}/deliveries").json()["results"][0]["status"]) != (
        "succeeded"
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
