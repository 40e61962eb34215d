"""Deliveries run on the `webhooks` Celery queue's own workers, at most WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION
per organisation at once (issue 54, finding 1): one organisation's slow receiver holds neither another
organisation's learning, nor an erasure, nor another organisation's deliveries."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.pipeline.models import MemoryTask
from apps.pipeline.services.execution import tasks_claim_due
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import subject_resolve
from apps.webhooks.models import WebhookDelivery
from apps.webhooks.services import WEBHOOK_QUEUE, endpoint_create, endpoint_send_test
from harness.processes import CeleryWorker, RedisServer, celery_broker, wait_for
from harness.webhook_receiver import RawListener, Receiver, trickle_headers
from tests.factories import ClientFactory


def _endpoint(client, url):
    endpoint, _ = endpoint_create(
        organization=client.organization, registered_by=client, url=url, events=["erasure.finished"]
    )
    return endpoint


@pytest.mark.django_db
def test_the_default_workers_never_claim_a_delivery_and_the_webhook_workers_only_deliveries(manager):
    endpoint = _endpoint(manager, "https://hooks.example.com/memory")
    delivery = endpoint_send_test(endpoint=endpoint)
    other = MemoryTask.objects.create(organization=manager.organization, task_type="embed_turns", payload={})
    assert [task.pk for task in tasks_claim_due(worker="host:1", limit=10)] == [other.pk]
    assert [task.pk for task in tasks_claim_due(worker="host:2", limit=10, lane=WEBHOOK_QUEUE)] == [delivery.task_id]


@pytest.mark.django_db
def test_an_organisation_at_its_cap_waits_while_another_organisation_is_served(manager, settings):
    settings.WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION = 1
    other = ClientFactory(name="other-org", can_manage_webhooks=True)
    ours = [endpoint_send_test(endpoint=_endpoint(manager, "https://a.example.com/")) for _ in range(2)]
    theirs = endpoint_send_test(endpoint=_endpoint(other, "https://b.example.com/"))
    # One of ours is being sent by a live process: the other waits; theirs does not.
    MemoryTask.objects.filter(pk=ours[0].task_id).update(
        status=MemoryTask.Status.RUNNING, claimed_by="host:9", heartbeat_at=timezone.now()
    )
    claimed = tasks_claim_due(worker="host:1", limit=10, lane=WEBHOOK_QUEUE)
    assert [task.pk for task in claimed] == [theirs.task_id]
    # A process that stopped heart-beating holds no place.
    MemoryTask.objects.filter(pk=ours[0].task_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert [task.pk for task in tasks_claim_due(worker="host:1", limit=10, lane=WEBHOOK_QUEUE)] == [ours[1].task_id]


@pytest.fixture
def broker():
    server = RedisServer().start()
    try:
        with celery_broker(server.url):
            yield server
    finally:
        server.stop()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_trickling_endpoint_holds_neither_learning_nor_erasure_nor_another_organisations_deliveries(
    manager, broker, add_messages, tmp_path
):
    """Workers as every deploy path starts them: one default worker process and the webhook worker (two
    processes). Organisation A's receiver answers a byte at a time for a minute; while it holds the
    attempt, B's learning finishes, A's own erasure finishes, and C's delivery arrives; A's second
    delivery waits for A's place."""
    learner = ClientFactory(name="learner-org", write_scope="default")
    neighbour = ClientFactory(name="neighbour-org", can_manage_webhooks=True)
    add_messages(manager, user_id="leaving", session_id="s-a")
    common = {"broker_url": broker.url, "settings_dict": connection.settings_dict}
    env = {"WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8", "WEBHOOK_TIMEOUT_SECONDS": "40"}
    workers = []
    with RawListener(trickle_headers(interval=0.2, seconds=60)) as trickler, Receiver() as receiver:
        try:
            workers.append(CeleryWorker(**common, log_path=tmp_path / "default.log", env=env).start(timeout=60))
            workers.append(
                CeleryWorker(
                    **common,
                    log_path=tmp_path / "webhooks.log",
                    pool="prefork",
                    concurrency=2,
                    queues=WEBHOOK_QUEUE,
                    env=env,
                ).start(timeout=60)
            )
            slow = _endpoint(manager, trickler.url)
            held = [endpoint_send_test(endpoint=slow) for _ in range(2)]
            wait_for(lambda: trickler.connections, timeout=30, message="A's first delivery to reach the trickler")

            added = add_messages(learner, user_id="someone", session_id="s-b", seal=True)
            erasure = erasure_request(
                subject=subject_resolve(organization=manager.organization, kind="user", subject_id="leaving"),
                requested_by=manager,
            )
            theirs = endpoint_send_test(endpoint=_endpoint(neighbour, receiver.url))

            def learned() -> bool:
                tasks = MemoryTask.objects.filter(pk__in=added["task_ids"])
                return not tasks.exclude(status=MemoryTask.Status.SUCCEEDED).exists()

            wait_for(learned, timeout=30, interval=0.2, message="B's learning to finish")
            wait_for(
                lambda: MemoryTask.objects.get(pk=erasure.task_id).status == MemoryTask.Status.SUCCEEDED,
                timeout=30,
                interval=0.2,
                message="A's erasure to finish",
            )
            wait_for(lambda: receiver.received, timeout=30, message="C's delivery")
            # All of it while A's first attempt was still held, and A's second still waiting for its place.
            assert trickler.hung_up == 0 and trickler.connections == 1
            assert WebhookDelivery.objects.get(pk=held[1].pk).attempts == 0
            assert receiver.event_ids() == [theirs.event_id]
        finally:
            trickler.stopping.set()
            for worker in workers:
                worker.stop()
    assert added["task_ids"]
