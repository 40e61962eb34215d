"""Deliveries driven through the real code paths (a skill sent to review, a session learned, an
erasure and an export finishing), run by task_execute against a real local HTTP receiver."""

import base64
import hashlib
import hmac
import json
import re
import time

import pytest

from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import queue_of
from apps.pipeline.services import task_execute
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import SHINGLE_WORDS, subject_fingerprint
from apps.skills.services.distill import session_distill
from apps.webhooks.models import WebhookDelivery, WebhookEndpoint
from apps.webhooks.services import endpoint_create, endpoint_send_test
from harness.webhook_receiver import Receiver
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.fixtures import tau_trajectories
from tests.skills.factories import tau_session

pytestmark = pytest.mark.django_db

ALL_EVENTS = ["skill.evolved", "skill.review_needed", "session.learned", "erasure.finished", "export.ready"]


def run_tasks(task_type: str, *, timeout: float = 10.0) -> None:
    """Runs the active tasks of a type as they come due (retries included) until none is left, as a worker
    of the type's queue does."""
    deadline = time.monotonic() + timeout
    while active := list(
        MemoryTask.objects.filter(task_type=task_type, status__in=MemoryTask.ACTIVE_STATUSES).values_list(
            "pk", flat=True
        )
    ):
        assert time.monotonic() < deadline, f"{task_type} tasks still active"
        for task_id in active:
            task_execute(task_id=task_id, worker="test", lane=queue_of(task_type))
        time.sleep(0.02)


def _endpoint(client, receiver_url: str, events=ALL_EVENTS, **options) -> tuple[WebhookEndpoint, str]:
    return endpoint_create(
        organization=client.organization, registered_by=client, url=receiver_url, events=events, **options
    )


def _learn_skills(client) -> None:
    """Task sessions distilled and their experiences evolved, as the pipeline does it."""
    successes = [item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"]][:2]
    for trajectory in successes:
        session_distill(session=tau_session(client, trajectory))
    run_tasks("evolve_skills")


def test_a_skill_sent_to_review_is_posted_signed_with_ids_only(manager, settings, allow_loopback):
    settings.LLM_PROVIDER, settings.SKILL_REVIEW_MODE = "rules", "manual"
    with Receiver() as receiver:
        endpoint, secret = _endpoint(manager, receiver.url, events=["skill.review_needed"])
        receiver.secret = secret
        _learn_skills(manager)
        run_tasks("deliver_webhook")

    assert receiver.refused == 0 and receiver.received
    payloads = [item["payload"] for item in receiver.received]
    assert {payload["type"] for payload in payloads} == {"skill.review_needed"}
    for item in receiver.received:
        payload = item["payload"]
        assert set(payload) == {"id", "type", "timestamp", "organization_id", "data"}
        assert set(payload["data"]) == {"skill_id", "scope", "version", "status"}  # ids only: no name, no text
        assert payload["data"]["status"] == "pending_review"
        # The recipe of docs/api.md, by hand: HMAC-SHA256 of "id.timestamp.body" with the decoded secret.
        headers = {name.lower(): value for name, value in item["headers"].items()}
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + item["body"]
        key = base64.b64decode(secret.removeprefix("whsec_"))
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        assert headers["webhook-signature"] == f"v1,{expected}" and headers["webhook-id"] == payload["id"]
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint)
    assert {delivery.status for delivery in deliveries} == {"succeeded"}
    assert all(delivery.attempts == 1 and delivery.last_status_code == 200 for delivery in deliveries)


def test_content_is_sent_only_to_an_endpoint_that_opted_in(manager, settings, allow_loopback):
    settings.LLM_PROVIDER = "rules"
    with Receiver() as plain, Receiver() as rich:
        _endpoint(manager, plain.url, events=["skill.evolved"])
        _endpoint(manager, rich.url, events=["skill.evolved"], include_content=True)
        _learn_skills(manager)
        run_tasks("deliver_webhook")

    assert len(plain.received) == len(rich.received) > 0
    assert all("content" not in item["payload"]["data"] for item in plain.received)
    for item in rich.received:
        content = item["payload"]["data"]["content"]
        assert content["name"] and content["instructions"].startswith("Steps:")


def test_a_distilled_session_and_a_finished_erasure_are_announced(manager, settings, add_messages, allow_loopback):
    settings.LLM_PROVIDER = "rules"
    trajectory = next(item for item in tau_trajectories() if item["reward"] >= 1.0)
    with Receiver() as receiver:
        _endpoint(manager, receiver.url, events=["session.learned", "erasure.finished"])
        session_distill(session=tau_session(manager, trajectory, user_id="learner"))
        run_tasks("deliver_webhook")  # before the erasure, which deletes the deliveries naming its user
        erasure = erasure_request(
            subject=subject_resolve(organization=manager.organization, kind="user", subject_id="learner"),
            requested_by=manager,
        )
        task_execute(task_id=erasure.task_id, worker="test")
        run_tasks("deliver_webhook")

    by_type = {item["payload"]["type"]: item["payload"]["data"] for item in receiver.received}
    assert by_type["session.learned"]["user_id"] == "learner"
    assert by_type["session.learned"]["learned_by"] == "distillation"
    # The erasure's id names it; the erased user_id is nowhere in the event.
    assert by_type["erasure.finished"] == {"erasure_id": str(erasure.pk), "subject_kind": "user", "status": "succeeded"}
    (sent,) = [item["body"] for item in receiver.received if item["payload"]["type"] == "erasure.finished"]
    assert b"learner" not in sent


def test_an_organisations_endpoint_never_gets_another_organisations_events(manager, settings, allow_loopback):
    settings.LLM_PROVIDER = "rules"
    other = ClientFactory(name="other-org", can_manage_webhooks=True)
    with Receiver() as ours, Receiver() as theirs:
        _endpoint(manager, ours.url)
        _endpoint(other, theirs.url)
        _learn_skills(manager)
        run_tasks("deliver_webhook")

    assert ours.received and not theirs.received
    assert {item["payload"]["organization_id"] for item in ours.received} == {str(manager.organization_id)}
    assert not WebhookDelivery.objects.filter(organization=other.organization).exists()


def test_network_errors_and_5xx_are_retried_until_delivered(manager, fast_retries, allow_loopback):
    fast_retries.WEBHOOK_TEST_SENDS_PER_MINUTE = 0  # twenty test events in a row
    with Receiver(fail_rate=0.5, seed=7) as receiver:
        endpoint, _ = _endpoint(manager, receiver.url)
        sent = [endpoint_send_test(endpoint=endpoint).event_id for _ in range(20)]
        run_tasks("deliver_webhook", timeout=30)

    assert sorted(set(receiver.event_ids())) == sorted(sent)  # nothing lost
    assert receiver.requests > len(sent)  # and it did take retries
    deliveries = list(WebhookDelivery.objects.filter(endpoint=endpoint))
    assert {delivery.status for delivery in deliveries} == {"succeeded"}
    assert any(delivery.attempts > 1 for delivery in deliveries)
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 0


def test_an_unreachable_endpoint_is_retried_then_the_delivery_fails_without_content(
    manager, fast_retries, allow_loopback
):
    fast_retries.WEBHOOK_MAX_ATTEMPTS = 3
    with Receiver() as receiver:
        url = receiver.url
    endpoint, _ = _endpoint(manager, url)  # nothing listens there any more
    delivery = endpoint_send_test(endpoint=endpoint)
    run_tasks("deliver_webhook")

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 3, None)
    assert delivery.last_error == "No HTTP answer"
    assert MemoryTask.objects.get(pk=delivery.task_id).status == "dead"
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 1 and endpoint.active


def test_a_4xx_is_not_retried(manager, fast_retries, allow_loopback):
    with Receiver(fail_rate=1.0, fail_status=410) as receiver:
        endpoint, _ = _endpoint(manager, receiver.url)
        delivery = endpoint_send_test(endpoint=endpoint)
        run_tasks("deliver_webhook")

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, 410)
    assert delivery.last_error == "HTTP 410" and receiver.requests == 1


def test_an_endpoint_is_disabled_after_repeated_failures_and_re_enabled_by_a_patch(
    manager, fast_retries, allow_loopback
):
    fast_retries.WEBHOOK_MAX_ATTEMPTS = 2
    fast_retries.WEBHOOK_DISABLE_AFTER_FAILURES = 3
    with Receiver(fail_rate=1.0, fail_status=500) as receiver:
        endpoint, _ = _endpoint(manager, receiver.url)
        for _ in range(3):
            endpoint_send_test(endpoint=endpoint)
        run_tasks("deliver_webhook")
        endpoint.refresh_from_db()
        assert not endpoint.active and endpoint.consecutive_failures == 3
        assert endpoint.disabled_at is not None and "3 failed deliveries" in endpoint.disabled_reason
        assert receiver.requests == 6

        late = endpoint_send_test(endpoint=endpoint)  # queued for a disabled endpoint: cancelled, not sent
        run_tasks("deliver_webhook")
        late.refresh_from_db()
        assert late.status == "cancelled" and receiver.requests == 6

        response = api_for(manager).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"active": True}, format="json")
        assert response.status_code == 200
        assert (response.json()["active"], response.json()["consecutive_failures"]) == (True, 0)
        assert response.json()["disabled_at"] is None


def test_an_event_without_endpoints_stores_nothing(manager, settings):
    settings.LLM_PROVIDER = "rules"
    _learn_skills(manager)
    assert not WebhookDelivery.objects.exists()
    assert not MemoryTask.objects.filter(task_type="deliver_webhook").exists()


def test_an_erasure_deletes_the_deliveries_naming_its_user_and_keeps_the_others(manager, settings, allow_loopback):
    settings.LLM_PROVIDER = "rules"
    first, second = [item for item in tau_trajectories() if item["reward"] >= 1.0][:2]
    with Receiver() as receiver:
        endpoint, _ = _endpoint(manager, receiver.url, events=["session.learned", "erasure.finished"])
        session_distill(session=tau_session(manager, first, user_id="leaving"))
        session_distill(session=tau_session(manager, second, user_id="staying"))
        run_tasks("deliver_webhook")
        assert {item["payload"]["data"]["user_id"] for item in receiver.received} == {"leaving", "staying"}

        erasure = erasure_request(
            subject=subject_resolve(organization=manager.organization, kind="user", subject_id="leaving"),
            requested_by=manager,
        )
        task_execute(task_id=erasure.task_id, worker="test")

    erasure.refresh_from_db()
    assert erasure.counts["webhooks.WebhookDelivery"] == 1
    left = {(delivery.event_type, delivery.payload["data"].get("user_id")) for delivery in endpoint.deliveries.all()}
    assert left == {("session.learned", "staying"), ("erasure.finished", None)}


def test_finished_deliveries_are_pruned_after_the_retention_and_pending_ones_kept(manager, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.webhooks.services import deliveries_prune

    endpoint, _ = _endpoint(manager, "http://127.0.0.1:9/unused")
    old_sent, old_pending, recent = (endpoint_send_test(endpoint=endpoint) for _ in range(3))
    WebhookDelivery.objects.filter(pk=old_sent.pk).update(status="succeeded")
    WebhookDelivery.objects.filter(pk=recent.pk).update(status="failed")
    WebhookDelivery.objects.filter(pk__in=[old_sent.pk, old_pending.pk]).update(
        updated_at=timezone.now() - timedelta(days=settings.WEBHOOK_DELIVERY_RETENTION_DAYS + 1)
    )
    assert deliveries_prune() == 1
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {old_pending.pk, recent.pk}


def _runs_of_words(text: str, size: int) -> set[str]:
    words = re.findall(r"\w+", text.lower())
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def test_content_sent_then_erasing_the_person_quoted_succeeds_with_nothing_left(manager, settings, allow_loopback):
    """Issue 54, finding 2: the delivery log kept the content it sent (a skill quoting the person), so the
    erasure found its words there and failed. Content is now rendered at send time and never stored."""
    settings.LLM_PROVIDER = "rules"
    trajectories = [item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"]]
    with Receiver() as receiver:
        _endpoint(manager, receiver.url, events=["skill.evolved", "erasure.finished"], include_content=True)
        for trajectory in trajectories[:2]:
            session_distill(session=tau_session(manager, trajectory, user_id="quoted"))
        run_tasks("evolve_skills")
        run_tasks("deliver_webhook")
        subject = subject_resolve(organization=manager.organization, kind="user", subject_id="quoted")
        needles, _ = subject_fingerprint(subject)
        sent = [item["payload"] for item in receiver.received if item["payload"]["type"] == "skill.evolved"]
        quoting = [
            payload
            for payload in sent
            if _runs_of_words(json.dumps(payload["data"]["content"]), SHINGLE_WORDS) & needles
        ]
        assert quoting, "the content sent quotes the person (what made the erasure fail)"
        assert not WebhookDelivery.objects.filter(payload__data__has_key="content").exists()

        erasure = erasure_request(subject=subject, requested_by=manager)
        task_execute(task_id=erasure.task_id, worker="test")
        run_tasks("deliver_webhook")

    erasure.refresh_from_db()
    assert (erasure.status, erasure.residual["total"]) == ("succeeded", 0), (erasure.error, erasure.residual)
    finished = [item["payload"]["data"] for item in receiver.received if item["payload"]["type"] == "erasure.finished"]
    assert [data["erasure_id"] for data in finished] == [str(erasure.pk)]
