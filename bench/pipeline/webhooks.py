"""Webhooks (issue 40): seconds from an event to its delivery, and events lost, when the receiver fails
half of the requests it gets.

One real Celery worker process of the `webhooks` queue (solo pool) on a private Redis and this process's
database, allowed to reach 127.0.0.0/8 (WEBHOOK_ALLOWED_NETWORKS; loopback is refused by default); a local
HTTP receiver (harness/webhook_receiver.py) that answers 503 to a seeded random half of the requests
and verifies the signature of the others. Events are committed one after another at a steady rate
(each a delivery row and its task in one transaction, as every event is); latency = the receiver's
first successful receipt − the commit. The worker runs the shipped webhook settings except the
backoff cap (`WEBHOOK_RETRY_MAX_SECONDS`, 8 s here, 3600 shipped): with the shipped cap the one
event in a few hundred that fails ten times in a row waits minutes for its next attempt, and the
run would end before it does (retried, not lost). The cap does not touch the first attempts, which
decide the p50. `lost` counts the events whose delivery ended without reaching the receiver (out of
attempts); `unfinished` those still being retried when the run stopped waiting.
`python -m bench webhooks`.
"""

import time
import uuid
from pathlib import Path

from bench.common import load_average, measured, percentile, write_result

TARGET_LOST = 0
TARGET_P50_SECONDS = 1.0
FAIL_RATE = 0.5
RETRY_MAX_SECONDS = 8


def _wait_for_deliveries(endpoint, timeout: float) -> None:
    from apps.webhooks.models import WebhookDelivery

    deadline = time.monotonic() + timeout
    while WebhookDelivery.objects.filter(endpoint=endpoint, status=WebhookDelivery.Status.PENDING).exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def run(output_dir, *, events: int = 200, rate_per_second: float = 20.0, log=print) -> dict:
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test.utils import override_settings

    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create
    from apps.webhooks.models import WebhookDelivery
    from apps.webhooks.services import endpoint_create, endpoint_send_test
    from harness.processes import CeleryWorker, RedisServer, celery_broker
    from harness.webhook_receiver import Receiver

    load_before = load_average()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    call_command("migrate", interactive=False, verbosity=0)
    organization = Organization.objects.create(name=f"bench-webhooks-{uuid.uuid4().hex[:12]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="default")
    redis_server, worker = RedisServer(), None
    committed: dict[str, float] = {}
    try:
        redis_server.start()
        with (
            celery_broker(redis_server.url),
            # Test events stand for events here: the per-organisation limit on test sends is lifted.
            override_settings(WEBHOOK_TEST_SENDS_PER_MINUTE=0, WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8"]),
            Receiver(fail_rate=FAIL_RATE, seed=40) as receiver,
        ):
            endpoint, secret = endpoint_create(
                organization=organization, registered_by=client, url=receiver.url, events=["skill.evolved"]
            )
            receiver.secret = secret
            worker = CeleryWorker(
                broker_url=redis_server.url,
                settings_dict=connection.settings_dict,
                log_path=output_dir / "webhooks-worker.log",
                pool="solo",
                queues="webhooks",
                env={"WEBHOOK_RETRY_MAX_SECONDS": str(RETRY_MAX_SECONDS), "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"},
            ).start()
            log(f"webhooks: worker pid {worker.pid} (solo pool); receiver fails {FAIL_RATE:.0%} of requests")
            started = time.monotonic()
            for index in range(events):
                with transaction.atomic():
                    delivery = endpoint_send_test(endpoint=endpoint)
                    transaction.on_commit(
                        lambda event_id=delivery.event_id: committed.setdefault(event_id, time.time())
                    )
                time.sleep(max(0.0, started + (index + 1) / rate_per_second - time.monotonic()))
            _wait_for_deliveries(endpoint, timeout=600)
            received = {}
            for item in receiver.received:
                received.setdefault(item["payload"]["id"], item["at"])
            requests, refused = receiver.requests, receiver.refused
        statuses = dict.fromkeys(WebhookDelivery.Status.values, 0)
        for status in WebhookDelivery.objects.filter(endpoint=endpoint).values_list("status", flat=True):
            statuses[status] += 1
        attempts = list(WebhookDelivery.objects.filter(endpoint=endpoint).values_list("attempts", flat=True))
    finally:
        if worker is not None:
            worker.stop()
        redis_server.stop()
        organization.delete()

    latencies = [received[event_id] - at for event_id, at in committed.items() if event_id in received]
    unfinished = statuses[WebhookDelivery.Status.PENDING]
    lost = len(committed) - len(latencies) - unfinished
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    result = {
        "benchmark": "webhooks",
        "worker": f"1 Celery worker process of the webhooks queue, solo pool; shipped WEBHOOK_* settings, WEBHOOK_RETRY_MAX_SECONDS={RETRY_MAX_SECONDS}",
        "receiver": f"local http.server, {FAIL_RATE:.0%} of requests answered 503 (seeded), signatures verified",
        "events": len(committed),
        "rate_per_second": rate_per_second,
        "delivered": len(latencies),
        "lost": lost,
        "unfinished": unfinished,
        "deliveries_by_status": statuses,
        "receiver_requests": requests,
        "bad_signatures": refused,
        "attempts_max": max(attempts, default=0),
        "event_to_delivery_seconds": {"p50": round(p50, 3), "p95": round(p95, 3), "max": round(max(latencies), 3)},
        "targets": {"lost": TARGET_LOST, "p50_seconds": TARGET_P50_SECONDS},
        "met": lost == TARGET_LOST and not unfinished and p50 < TARGET_P50_SECONDS,
        **measured(load_before=load_before),
    }
    log(
        f"webhooks: {len(committed)} events, {len(latencies)} delivered, {lost} lost, {unfinished} unfinished; "
        f"{requests} requests; "
        f"event → delivery p50 {p50:.3f}s p95 {p95:.3f}s max {max(latencies):.3f}s"
    )
    write_result(output_dir, "webhooks", result)
    return result
