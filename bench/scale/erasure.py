"""Erasure benchmark: erase a user with 100,000 messages and 10,000 memories while another client
keeps ingesting through the ingest service, and compare that client's ingest latency with and
without the erasure running.

The subject's data is seeded with set-based INSERTs (seconds, not minutes); a share of the turns
carry embeddings, so the purge also removes HNSW-indexed rows. The erasure runs through the
pipeline (`task_execute` of its `erase_subject` task) in this process; the ingest runs in a thread
with its own database connection, paced at INGEST_PER_SECOND requests of two turns each.
Celery publishes go to a private redis-server, which the erasure's verification also scans.
`python -m bench erasure`.
"""

import statistics
import threading
import time
import uuid

from bench.common import (
    Stopwatch,
    load_average,
    measured,
    percentile,
    private_broker,
    write_result,
)
from bench.scale.synthetic import EMBEDDED_SHARE, seed_subject

MESSAGES = 100_000
MEMORIES = 10_000  # half episodic, half semantic, one history row each
EXPERIENCES = 1_000
INGEST_PER_SECOND = 20
BASELINE_SECONDS = 15
TARGET_P95_RATIO = 2.0


class _Ingest(threading.Thread):
    """Another client ingesting two-turn batches at a steady pace; latencies tagged by phase."""

    def __init__(self, client):
        super().__init__(daemon=True, name="bench-ingest")
        self.client = client
        self.phase = "baseline"
        self.latencies: dict[str, list[float]] = {"baseline": [], "during": []}
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self):
        from django.db import connection

        from apps.conversations.services.ingest import messages_ingest

        index = 0
        try:
            while not self.stopped.is_set():
                phase = self.phase
                with Stopwatch() as watch:
                    messages_ingest(
                        client=self.client,
                        user_id=f"other-{index % 20}",
                        session_id=f"live-{index}",
                        messages=[
                            {"role": "user", "content": f"Ingest {index}: what is the weather in town {index % 97}?"},
                            {"role": "assistant", "content": "Sunny with a light breeze."},
                        ],
                    )
                self.latencies[phase].append(watch.ms)
                index += 1
                self.stopped.wait(max(0.0, 1 / INGEST_PER_SECOND - watch.seconds))
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            connection.close()


def _summary(values: list[float]) -> dict:
    return {
        "requests": len(values),
        "p50_ms": round(percentile(values, 0.50), 2),
        "p95_ms": round(percentile(values, 0.95), 2),
        "max_ms": round(max(values), 2),
        "mean_ms": round(statistics.fmean(values), 2),
    }


def run(output_dir, *, messages: int = MESSAGES, memories: int = MEMORIES, log=print) -> dict:
    from django.conf import settings
    from django.core.management import call_command

    from apps.pipeline.services import task_execute, worker_name
    from apps.privacy.models import ErasureRequest
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve
    from apps.tenancy.services import client_create, end_user_get_or_create, organization_create

    load_before = load_average()
    call_command("migrate", interactive=False, verbosity=0)
    organization = organization_create(name=f"bench-erasure-{uuid.uuid4().hex[:12]}")
    subject_client, _ = client_create(
        organization=organization, name="subject-agent", write_scope="default", can_erase=True
    )
    other_client, _ = client_create(organization=organization, name="other-agent", write_scope="default")
    end_user = end_user_get_or_create(organization=organization, user_id="bench-subject")

    try:
        with private_broker():
            with Stopwatch() as seeding:
                seed_subject(
                    organization,
                    subject_client,
                    end_user,
                    messages=messages,
                    memories=memories,
                    experiences=EXPERIENCES,
                )
            log(
                f"erasure: seeded {messages} messages, {memories} memories, {EXPERIENCES} experiences in {seeding.seconds:.1f}s"
            )

            ingest = _Ingest(other_client)
            ingest.start()
            time.sleep(BASELINE_SECONDS)
            subject = subject_resolve(organization=organization, kind="user", subject_id="bench-subject")
            erasure = erasure_request(subject=subject, requested_by=subject_client)
            ingest.phase = "during"
            with Stopwatch() as erasing:
                outcome = task_execute(task_id=erasure.task_id, worker=worker_name())
            ingest.stopped.set()
            ingest.join(timeout=30)
            if ingest.error is not None:
                raise RuntimeError(f"ingest failed during the benchmark: {ingest.error!r}")
            erasure = ErasureRequest.objects.get(pk=erasure.pk)
            if outcome != "succeeded" or erasure.status != ErasureRequest.Status.SUCCEEDED:
                raise RuntimeError(f"the erasure ended {outcome}/{erasure.status}: {erasure.error} {erasure.residual}")
    finally:
        organization.delete()

    erasure_seconds = erasing.seconds
    baseline, during = _summary(ingest.latencies["baseline"]), _summary(ingest.latencies["during"])
    ratio = round(during["p95_ms"] / baseline["p95_ms"], 2)
    removed = {table: count for table, count in erasure.counts.items() if count}
    result = {
        "benchmark": "erasure",
        "subject": {
            "messages": messages,
            "memories": memories,
            "experiences": EXPERIENCES,
            "embedded_share": EMBEDDED_SHARE,
        },
        "seed_seconds": round(seeding.seconds, 1),
        "erasure_seconds": round(erasure_seconds, 2),
        "rows_removed": removed,
        "rows_per_second": round(sum(count for table, count in removed.items() if "(" not in table) / erasure_seconds),
        "residual_total": erasure.residual["total"],
        "batch_size": settings.ERASURE_BATCH_SIZE,
        "ingest": {
            "paced_requests_per_second": INGEST_PER_SECOND,
            "turns_per_request": 2,
            "without_erasure": baseline,
            "during_erasure": during,
            "p95_ratio": ratio,
        },
        "target": f"ingest p95 during erasure <= {TARGET_P95_RATIO}x its p95 without",
        "meets_target": ratio <= TARGET_P95_RATIO,
        **measured(load_before=load_before),
    }
    write_result(output_dir, "erasure", result)
    log(
        f"erasure: {messages} messages + {memories} memories erased in {erasure_seconds:.1f}s "
        f"({result['rows_per_second']} rows/s); other client's ingest p95 {baseline['p95_ms']} ms without, "
        f"{during['p95_ms']} ms during ({ratio}x, target <= {TARGET_P95_RATIO}x: {'met' if result['meets_target'] else 'NOT met'})"
    )
    return result
