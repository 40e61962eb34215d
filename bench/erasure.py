"""Erasure benchmark: erase a user with 100,000 messages and 10,000 memories while another client
keeps ingesting through the ingest service, and compare that client's ingest latency with and
without the erasure running.

The subject's data is seeded with set-based INSERTs (seconds, not minutes); a share of the turns
carry embeddings, so the purge also removes HNSW-indexed rows. The erasure runs through the
pipeline (`task_execute` of its `erase_subject` task) in this process; the ingest runs in a thread
with its own database connection, paced at INGEST_PER_SECOND requests of two turns each.
Celery publishes go to a private redis-server, which the erasure's verification also scans.
"""

import json
import os
import platform
import statistics
import threading
import time
import uuid
from pathlib import Path

MESSAGES = 100_000
MESSAGES_PER_SESSION = 100
MEMORIES = 10_000  # half episodic, half semantic, one history row each
EXPERIENCES = 1_000
EMBEDDED_SHARE = 0.1
INGEST_PER_SECOND = 20
BASELINE_SECONDS = 15
TARGET_P95_RATIO = 2.0


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def _vector_sql(seed: str) -> str:
    """A deterministic, varied 384-dimensional vector computed in SQL from an integer expression."""
    return f"(SELECT ('[' || string_agg(to_char(sin(({seed}) * 0.37 + j), 'FM0.000000'), ',') || ']')::vector FROM generate_series(1, 384) j)"


def _seed(organization, client, end_user, *, messages: int, memories: int, experiences: int) -> None:
    from django.db import connection, transaction

    from apps.conversations.models import Message, Session
    from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
    from apps.skills.models import SkillExperience

    sessions = max(1, messages // MESSAGES_PER_SESSION)
    embedded_every = max(1, round(1 / EMBEDDED_SHARE)) if EMBEDDED_SHARE else 0
    params = {"org": organization.pk, "user": end_user.pk, "client": client.pk}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Session._meta.db_table} (id, created_at, updated_at, organization_id, end_user_id, client_id,
                scope, session_id, session_tag, status, outcome, filter_tags, message_count, last_seq, last_message_at)
            SELECT gen_random_uuid(), now(), now(), %(org)s, %(user)s, %(client)s, 'default', 'bench-' || n,
                'conversation', 'sealed', 'unknown', '{{"scope": "default"}}', {MESSAGES_PER_SESSION}, {MESSAGES_PER_SESSION}, now()
            FROM generate_series(1, {sessions}) n""",
            params,
        )
        cursor.execute(
            f"""INSERT INTO {Message._meta.db_table} (id, created_at, updated_at, organization_id, end_user_id, scope,
                session_id, seq, role, name, content, tool_calls, tool_call_id, metadata, truncated, occurred_at, created_by_id,
                context, embedding, embedding_model, learned_at)
            SELECT gen_random_uuid(), now(), now(), %(org)s, %(user)s, 'default', s.id, k,
                CASE WHEN k %% 2 = 1 THEN 'user' ELSE 'assistant' END, '',
                'Turn ' || k || ' of ' || s.session_id || ': the subject talked about trip ' || (k * 7919 %% 1000) || ' and plan ' || md5(s.id::text || k),
                NULL, '', '{{}}', false, now(), %(client)s, '',
                CASE WHEN {embedded_every} > 0 AND k %% {embedded_every or 1} = 0 THEN {_vector_sql("hashtext(s.id::text) + k")} END,
                CASE WHEN {embedded_every} > 0 AND k %% {embedded_every or 1} = 0 THEN 'bench' ELSE '' END, NULL
            FROM {Session._meta.db_table} s, generate_series(1, {MESSAGES_PER_SESSION}) k
            WHERE s.end_user_id = %(user)s""",
            params,
        )
        for memory_model, change_model, extra_columns, extra_values in (
            (
                EpisodicMemory,
                EpisodicMemoryChange,
                "occurred_at, time_granularity, actor, event_type",
                "now(), 'day', 'subject', 'trip'",
            ),
            (SemanticMemory, SemanticMemoryChange, "name, source", "'subject fact ' || n, 'bench'"),
        ):
            cursor.execute(
                f"""INSERT INTO {memory_model._meta.db_table} (id, created_at, updated_at, organization_id, scope, end_user_id,
                    source_message_ids, summary, details, embedding, embedding_model, {extra_columns})
                SELECT gen_random_uuid(), now(), now(), %(org)s, 'default', %(user)s, '{{}}',
                    'The subject remembered trip ' || n || ' ' || md5(n::text), '', {_vector_sql("n")}, 'bench', {extra_values}
                FROM generate_series(1, {memories // 2}) n""",
                params,
            )
            cursor.execute(
                f"""INSERT INTO {change_model._meta.db_table} (id, created_at, updated_at, memory_id, operation, previous_value,
                    new_value, actor, reason)
                SELECT gen_random_uuid(), now(), now(), m.id, 'add', NULL, jsonb_build_object('summary', m.summary), 'bench', ''
                FROM {memory_model._meta.db_table} m WHERE m.end_user_id = %(user)s""",
                params,
            )
        cursor.execute(
            f"""INSERT INTO {SkillExperience._meta.db_table} (id, created_at, updated_at, organization_id, scope, end_user_id,
                session_id, source_message_ids, experience_type, title, content, importance, credibility, evidence,
                action_signature, status, created_by_id, embedding, embedding_model)
            SELECT gen_random_uuid(), now(), now(), %(org)s, 'default', %(user)s, NULL, '{{}}', 'worth_learning',
                'Lesson ' || n, 'Request: trip ' || n || E'\\nSteps:\\n1. search_flights(date)', 0.5, 0.5,
                jsonb_build_object('quote', 'trip ' || n, 'signal_type', 'inferred'), '{{search_flights}}', 'consumed',
                %(client)s, NULL, ''
            FROM generate_series(1, {experiences}) n""",
            params,
        )


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

        from apps.conversations.services import messages_ingest

        index = 0
        try:
            while not self.stopped.is_set():
                started = time.perf_counter()
                phase = self.phase
                messages_ingest(
                    client=self.client,
                    user_id=f"other-{index % 20}",
                    session_id=f"live-{index}",
                    messages=[
                        {"role": "user", "content": f"Ingest {index}: what is the weather in town {index % 97}?"},
                        {"role": "assistant", "content": "Sunny with a light breeze."},
                    ],
                )
                elapsed = time.perf_counter() - started
                self.latencies[phase].append(elapsed * 1000)
                index += 1
                self.stopped.wait(max(0.0, 1 / INGEST_PER_SECOND - elapsed))
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            connection.close()


def _summary(values: list[float]) -> dict:
    return {
        "requests": len(values),
        "p50_ms": round(_percentile(values, 0.50), 2),
        "p95_ms": round(_percentile(values, 0.95), 2),
        "max_ms": round(max(values), 2),
        "mean_ms": round(statistics.fmean(values), 2),
    }


def run(output_dir, *, messages: int = MESSAGES, memories: int = MEMORIES, log=print) -> dict:
    from django.core.management import call_command
    from django.test.utils import override_settings

    from apps.pipeline.services import task_execute, worker_name
    from apps.privacy.models import ErasureRequest
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve
    from apps.tenancy.services import client_create, end_user_get_or_create, organization_create
    from tests.harness.processes import RedisServer, celery_broker

    load_before = round(os.getloadavg()[0], 2)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    call_command("migrate", interactive=False, verbosity=0)
    organization = organization_create(name=f"bench-erasure-{uuid.uuid4().hex[:12]}")
    subject_client, _ = client_create(
        organization=organization, name="subject-agent", write_scope="default", can_erase=True
    )
    other_client, _ = client_create(organization=organization, name="other-agent", write_scope="default")
    end_user = end_user_get_or_create(organization=organization, user_id="bench-subject")

    redis_server = RedisServer()
    try:
        redis_server.start()
        with (
            celery_broker(redis_server.url),
            override_settings(CELERY_BROKER_URL=redis_server.url, CELERY_RESULT_BACKEND=redis_server.url),
        ):
            started = time.perf_counter()
            _seed(organization, subject_client, end_user, messages=messages, memories=memories, experiences=EXPERIENCES)
            seed_seconds = time.perf_counter() - started
            log(
                f"erasure: seeded {messages} messages, {memories} memories, {EXPERIENCES} experiences in {seed_seconds:.1f}s"
            )

            ingest = _Ingest(other_client)
            ingest.start()
            time.sleep(BASELINE_SECONDS)
            subject = subject_resolve(organization=organization, kind="user", subject_id="bench-subject")
            erasure = erasure_request(subject=subject, requested_by=subject_client)
            ingest.phase = "during"
            started = time.perf_counter()
            outcome = task_execute(task_id=erasure.task_id, worker=worker_name())
            erasure_seconds = time.perf_counter() - started
            ingest.stopped.set()
            ingest.join(timeout=30)
            if ingest.error is not None:
                raise RuntimeError(f"ingest failed during the benchmark: {ingest.error!r}")
            erasure = ErasureRequest.objects.get(pk=erasure.pk)
            if outcome != "succeeded" or erasure.status != ErasureRequest.Status.SUCCEEDED:
                raise RuntimeError(f"the erasure ended {outcome}/{erasure.status}: {erasure.error} {erasure.residual}")
    finally:
        redis_server.stop()
        organization.delete()

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
        "seed_seconds": round(seed_seconds, 1),
        "erasure_seconds": round(erasure_seconds, 2),
        "rows_removed": removed,
        "rows_per_second": round(sum(count for table, count in removed.items() if "(" not in table) / erasure_seconds),
        "residual_total": erasure.residual["total"],
        "batch_size": _setting("ERASURE_BATCH_SIZE"),
        "ingest": {
            "paced_requests_per_second": INGEST_PER_SECOND,
            "turns_per_request": 2,
            "without_erasure": baseline,
            "during_erasure": during,
            "p95_ratio": ratio,
        },
        "target": f"ingest p95 during erasure <= {TARGET_P95_RATIO}x its p95 without",
        "meets_target": ratio <= TARGET_P95_RATIO,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m_before": load_before,
            "load_average_1m_after": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (output_dir / "erasure.json").write_text(json.dumps(result, indent=2) + "\n")
    log(
        f"erasure: {messages} messages + {memories} memories erased in {erasure_seconds:.1f}s "
        f"({result['rows_per_second']} rows/s); other client's ingest p95 {baseline['p95_ms']} ms without, "
        f"{during['p95_ms']} ms during ({ratio}x, target <= {TARGET_P95_RATIO}x: {'met' if result['meets_target'] else 'NOT met'})"
    )
    return result


def _setting(name):
    from django.conf import settings

    return getattr(settings, name)
