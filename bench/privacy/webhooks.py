"""Webhooks that cannot stall other tenants or reach inside (issue 54): three rows.

Trickle: organisation A's endpoint answers `200` and then its body a byte a second for 20 s (a listener
on 127.0.0.1, allowed by WEBHOOK_ALLOWED_NETWORKS), with WEBHOOK_TIMEOUT_SECONDS=2 as in the finding;
three of A's deliveries are queued. Organisation B adds a sealed conversation session; the row is the
seconds from the add until all its tasks (embedding, extraction) succeeded, idle and while A's trickler
holds an attempt, and the delay between the two. Workers are real processes on a private Redis: either
one process consuming both queues (`-Q celery,webhooks`, what a deploy without the webhook worker
would amount to) or as every deploy path starts them (a one-process default worker and a one-process
webhook worker).

Content and erasure: a content endpoint (`include_content`) receives the skills learned from a
person's task sessions (quoting them), then that person is erased: the erasure's status, its residual,
and whether `erasure.finished` was delivered.

Internal addresses: every spelling of harness/webhook_receiver.INTERNAL_SPELLINGS aimed at a listener's
port, registered through the API (refused or not) and delivered to from a stored row (reached or not),
with the shipped settings; the control allows 127.0.0.0/8 and counts the spellings that then reach it.

`python -m bench privacy_webhooks` (a row of `python -m bench privacy`).
"""

import contextlib
import json
import time
import uuid
from pathlib import Path

from bench.common import load_average, machine, measured_at, write_result

TRICKLE_SECONDS = 20
ATTEMPT_SECONDS = 2
TARGET_DELAY_SECONDS = 1.0
ARRANGEMENTS = {
    "one_process_for_both_queues": [("all", "celery,webhooks")],
    "as_deployed": [("default", None), ("webhooks", "webhooks")],
}
CONVERSATION = [
    {"role": "user", "content": "I moved to Lisbon last spring and I work as a ceramicist there."},
    {"role": "assistant", "content": "Lisbon is lovely; how is the studio going?"},
    {"role": "user", "content": "Busy: I am preparing an exhibition of glazed tiles for October."},
    {"role": "assistant", "content": "Good luck with the exhibition."},
]


def _learning_seconds(client, *, timeout: float = 180.0) -> float:
    from apps.conversations.services.ingest import messages_ingest
    from apps.pipeline.models import MemoryTask

    started = time.monotonic()
    added = messages_ingest(
        client=client,
        user_id=f"u-{uuid.uuid4().hex[:8]}",
        session_id=uuid.uuid4().hex[:12],
        messages=CONVERSATION,
        seal=True,
    )
    tasks = MemoryTask.objects.filter(pk__in=added.task_ids)
    while tasks.exclude(status=MemoryTask.Status.SUCCEEDED).exists():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"B's learning not finished after {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - started


def trickle(output_dir: Path, arrangement: str, *, log=print) -> dict:
    from django.db import connection

    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create
    from apps.webhooks.services import endpoint_create, endpoint_send_test
    from harness.processes import CeleryWorker, RedisServer, celery_broker, wait_for
    from harness.webhook_receiver import RawListener, trickle_body

    slow_org = Organization.objects.create(name=f"bench-trickle-a-{uuid.uuid4().hex[:10]}")
    learner_org = Organization.objects.create(name=f"bench-trickle-b-{uuid.uuid4().hex[:10]}")
    slow_client, _ = client_create(organization=slow_org, name="a", write_scope="default")
    learner, _ = client_create(organization=learner_org, name="b", write_scope="default")
    redis_server, workers = RedisServer().start(), []
    env = {"WEBHOOK_TIMEOUT_SECONDS": str(ATTEMPT_SECONDS), "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
    try:
        with celery_broker(redis_server.url), RawListener(trickle_body(interval=1.0, seconds=TRICKLE_SECONDS)) as slow:
            for name, queues in ARRANGEMENTS[arrangement]:
                worker = CeleryWorker(
                    broker_url=redis_server.url,
                    settings_dict=connection.settings_dict,
                    log_path=output_dir / f"privacy-webhooks-{arrangement}-{name}.log",
                    queues=queues,
                    env=env,
                )
                workers.append(worker.start(timeout=90))
            idle = min(_learning_seconds(learner) for _ in range(3))
            endpoint, _ = endpoint_create(
                organization=slow_org, registered_by=slow_client, url=slow.url, events=["erasure.finished"]
            )
            for _ in range(3):
                endpoint_send_test(endpoint=endpoint)
            wait_for(lambda: slow.connections, timeout=60, message="the trickler's first connection")
            held = _learning_seconds(learner)
            connections = slow.connections
    finally:
        for worker in workers:
            worker.stop()
        redis_server.stop()
        slow_org.delete()
        learner_org.delete()
    result = {
        "workers": [
            f"{name}: -Q {queues or 'celery (default)'}, solo pool" for name, queues in ARRANGEMENTS[arrangement]
        ],
        "b_learning_idle_seconds": round(idle, 3),
        "b_learning_while_a_trickles_seconds": round(held, 3),
        "delay_seconds": round(held - idle, 3),
        "trickler_connections_meanwhile": connections,
    }
    log(f"privacy_webhooks trickle ({arrangement}): B's learning {idle:.2f} s idle, {held:.2f} s while A trickles")
    return result


def content_then_erasure(*, log=print) -> dict:
    from django.test.utils import override_settings

    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.conversations.models import Session
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import task_execute
    from apps.privacy.models import ErasureRequest
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve
    from apps.skills.services.distill import session_distill
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create
    from apps.webhooks.services import endpoint_create
    from bench.common import private_broker, run_pending_tasks
    from bench.data import load, task_session_ingest
    from harness.webhook_receiver import Receiver

    organization = Organization.objects.create(name=f"bench-content-{uuid.uuid4().hex[:10]}")
    client, _ = client_create(
        organization=organization, name="c", write_scope="default", can_erase=True, can_manage_webhooks=True
    )
    trajectories = [
        item for item in load("tau-airline-dev.json") if item["reward"] >= 1.0 and item["info"]["task"]["actions"]
    ]
    try:
        with (
            private_broker(),
            override_settings(LLM_PROVIDER="rules", WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8"]),
            Receiver() as receiver,
        ):
            endpoint_create(
                organization=organization,
                registered_by=client,
                url=receiver.url,
                events=["skill.evolved", "erasure.finished"],
                include_content=True,
            )
            for item in trajectory_sessions(trajectories[:2]):
                task_session_ingest(client, {**item, "user_id": "quoted"})
                session_distill(
                    session=Session.objects.get(
                        organization=organization, session_id=item["session_id"], end_user__user_id="quoted"
                    )
                )
            run_pending_tasks(organization)
            skills_sent = sum(item["payload"]["type"] == "skill.evolved" for item in receiver.received)
            erasure = erasure_request(
                subject=subject_resolve(organization=organization, kind="user", subject_id="quoted"),
                requested_by=client,
            )
            with contextlib.suppress(Exception):  # a failed erasure is the figure, not the bench's end
                task_execute(task_id=erasure.task_id, worker="bench")
            # A failed erasure would be retried: it is stopped here, its figures kept.
            MemoryTask.objects.filter(pk=erasure.task_id, status__in=MemoryTask.CLAIMABLE_STATUSES).update(
                status=MemoryTask.Status.CANCELLED
            )
            run_pending_tasks(organization, task_types=["deliver_webhook"])
            finished = [item for item in receiver.received if item["payload"]["type"] == "erasure.finished"]
        erasure = ErasureRequest.objects.get(pk=erasure.pk)
    finally:
        organization.delete()
    result = {
        "skill_deliveries_with_content": skills_sent,
        "erasure_status": erasure.status,
        "residual": (erasure.residual or {}).get("total"),
        "erasure_finished_delivered": len(finished),
    }
    log(f"privacy_webhooks content+erasure: {json.dumps(result)}")
    return result


def internal_addresses(*, log=print) -> dict:
    from django.test.utils import override_settings

    from apps.core.errors import ApplicationError
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create
    from apps.webhooks.operations import create_webhook
    from apps.webhooks.services import DeliveryFailed, delivery_run, endpoint_create, endpoint_send_test
    from harness.webhook_receiver import INTERNAL_SPELLINGS, Receiver

    organization = Organization.objects.create(name=f"bench-ssrf-{uuid.uuid4().hex[:10]}")
    client, _ = client_create(organization=organization, name="s", can_manage_webhooks=True)

    def reached(urls) -> int:
        with Receiver() as receiver:
            for url in urls(receiver.server.server_address[1]):
                endpoint, _ = endpoint_create(
                    organization=organization, registered_by=client, url=url, events=["skill.evolved"]
                )
                with contextlib.suppress(DeliveryFailed):
                    delivery_run(delivery_id=endpoint_send_test(endpoint=endpoint).pk, final=True)
                endpoint.delete()
        return receiver.requests

    def spelled(port):
        return ["http://" + spelling.format(port=port) + "/hook" for spelling in INTERNAL_SPELLINGS]

    try:
        with override_settings(WEBHOOK_TEST_SENDS_PER_MINUTE=0, WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION=0):
            refused = 0
            for url in spelled(8080):
                try:
                    create_webhook(client=client, data={"url": url, "events": ["skill.evolved"]})
                except ApplicationError:
                    refused += 1
            organization.webhook_endpoints.all().delete()
            reached_default = reached(spelled)
            with override_settings(WEBHOOK_ALLOWED_NETWORKS=["127.0.0.0/8", "::1/128"]):
                reached_allowed = reached(spelled)
    finally:
        organization.delete()
    result = {
        "spellings": len(INTERNAL_SPELLINGS),
        "refused_at_registration": refused,
        "reached_at_connect_time": reached_default,
        "reached_when_127_0_0_0_8_is_allowed": reached_allowed,
    }
    log(f"privacy_webhooks internal addresses: {json.dumps(result)}")
    return result


def run(output_dir, *, arrangements=tuple(ARRANGEMENTS), log=print) -> dict:
    load_before = load_average()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    trickles = {arrangement: trickle(output_dir, arrangement, log=log) for arrangement in arrangements}
    content = content_then_erasure(log=log)
    addresses = internal_addresses(log=log)
    deployed = trickles.get("as_deployed", {})
    result = {
        "benchmark": "privacy_webhooks",
        "trickle": {
            "endpoint": f"200, then the body a byte a second for {TRICKLE_SECONDS} s; WEBHOOK_TIMEOUT_SECONDS={ATTEMPT_SECONDS}",
            **trickles,
        },
        "content_then_erasure": content,
        "internal_addresses": addresses,
        "targets": {
            "trickle_delay_seconds_below": TARGET_DELAY_SECONDS,
            "erasure_residual": 0,
            "internal_spellings_reached": 0,
        },
        "targets_met": {
            "trickle": deployed.get("delay_seconds", float("inf")) < TARGET_DELAY_SECONDS,
            "content_then_erasure": content["erasure_status"] == "succeeded" and content["residual"] == 0,
            "internal_addresses": addresses["reached_at_connect_time"] == 0 and addresses["spellings"] >= 15,
        },
        "machine": machine(load_before=load_before),
        "measured_at": measured_at(),
    }
    write_result(output_dir, "privacy_webhooks", result)
    return result
