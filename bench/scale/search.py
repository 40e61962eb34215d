"""Scale benchmark: search and retrieval latency at 100k and 1M messages (and 100k skills).

Runs in a child process against its own embedded PostgreSQL (DATA_DIR=.data/bench-scale,
recreated every run) so the bulk data never touches the development database. Synthetic
text comes from a Zipf-distributed vocabulary; vectors are the hash embedder's unigram
features (384 dimensions), computed with numpy so generation is fast. Messages are written
with binary COPY with the search indexes dropped, then the indexes are built and timed.

For each stage it measures p50/p95 of `POST /memory/search` (hybrid, one user, limit 10)
and `POST /skills/retrieve` (k=5, over BENCH_SCALE_SKILLS skills in the reader's scope and a tenth as
many in another) through HTTP (gunicorn), next to the same SQL executed directly
with psycopg in the same run, `POST /memory/context` (the same user and query, 1,000
tokens) as a ratio to the search, and `GET /me`: the floor of every API call (HTTP, the key,
the rate limit), which no change to the search can lower.

`python -m bench scale`: BENCH_SCALE_MESSAGES (default 1,000,000) messages, measured at 100k and at that
size, and BENCH_SCALE_SKILLS (default 100,000) skills. With BENCH_SCALE_KEEP_DATA set, the database is left
in .data/bench-scale afterwards, to measure other code on the same data (the next run recreates it).
"""

import json
import os
import shutil
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.common import Stopwatch, api_server, percentiles, write_result
from bench.scale.synthetic import texts_and_vectors, vocabulary, word_vectors

ROOT = Path(__file__).resolve().parents[2]
QUERIES = 200
MESSAGE_INDEXES = {
    "message_search_vector_idx": "CREATE INDEX message_search_vector_idx ON conversations_message USING gin (search_vector)",
    "message_content_trgm_idx": "CREATE INDEX message_content_trgm_idx ON conversations_message USING gin (content gin_trgm_ops)",
    "message_embedding_hnsw_idx": "CREATE INDEX message_embedding_hnsw_idx ON conversations_message USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
}


def run(output_dir: Path, *, messages: int | None = None, users: int = 1000, skills: int | None = None) -> dict:
    """Parent side: a fresh data directory and a child process that does the work."""
    messages = messages or int(os.environ.get("BENCH_SCALE_MESSAGES", "1000000"))
    skills = skills or int(os.environ.get("BENCH_SCALE_SKILLS", "100000"))
    data_dir = ROOT / ".data" / "bench-scale"
    shutil.rmtree(data_dir, ignore_errors=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DATA_DIR=str(data_dir), EMBEDDING_PROVIDER="hash", LOG_LEVEL="WARNING")
    env.pop("DATABASE_URL", None)
    subprocess.run(
        [sys.executable, "-m", "bench.scale.search", str(output_dir), str(messages), str(users), str(skills)],
        env=env,
        cwd=ROOT,
        check=True,
    )
    if not os.environ.get("BENCH_SCALE_KEEP_DATA"):
        shutil.rmtree(data_dir, ignore_errors=True)
    return json.loads((output_dir / "scale.json").read_text())


def _copy_messages(connection, rows_iter):
    from pgvector.psycopg import register_vector

    register_vector(connection)
    columns = (
        "id, created_at, updated_at, organization_id, end_user_id, scope, session_id, seq, role, name, content,"
        " tool_call_id, metadata, truncated, occurred_at, created_by_id, embedding, embedding_model, context"
    )
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY conversations_message ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(
            [
                "uuid",
                "timestamptz",
                "timestamptz",
                "uuid",
                "uuid",
                "varchar",
                "uuid",
                "int4",
                "varchar",
                "varchar",
                "text",
                "varchar",
                "jsonb",
                "bool",
                "timestamptz",
                "uuid",
                "vector",
                "varchar",
                "text",
            ]
        )
        for row in rows_iter:
            copy.write_row(row)
    connection.commit()


def _copy_skills(connection, rows_iter):
    from pgvector.psycopg import register_vector

    register_vector(connection)
    columns = (
        "id, created_at, updated_at, organization_id, scope, name, description, instructions, triggers, examples,"
        " entry_type, status, version, action_signature, embedding, embedding_model, shared, supporters"
    )
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY skills_skill ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy,
    ):
        copy.set_types(
            [
                "uuid",
                "timestamptz",
                "timestamptz",
                "uuid",
                "varchar",
                "varchar",
                "text",
                "text",
                "jsonb",
                "jsonb",
                "varchar",
                "varchar",
                "int4",
                "varchar[]",
                "vector",
                "varchar",
                "bool",
                "uuid[]",
            ]
        )
        for row in rows_iter:
            copy.write_row(row)
    connection.commit()


def _child(output_dir: Path, messages: int, users: int, skills: int) -> None:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    import django

    django.setup()
    import httpx
    import numpy as np
    import psycopg
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection as django_connection
    from psycopg.types.json import Jsonb

    from apps.conversations.models import Session
    from apps.search import engine
    from apps.search.registry import SOURCES
    from apps.tenancy.models import EndUser
    from apps.tenancy.services import client_create, organization_create

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(7)
    words, probabilities = vocabulary(rng)
    word_matrix = word_vectors(words)
    organization = organization_create(name="scale")
    client_a, key_a = client_create(organization=organization, name="a", write_scope="scope-a")
    client_create(organization=organization, name="b", write_scope="scope-b")
    reader, reader_key = client_create(
        organization=organization, name="reader", write_scope=None, read_scopes=["scope-a"]
    )
    end_users = EndUser.objects.bulk_create(
        [EndUser(organization=organization, user_id=f"user-{n}") for n in range(users)]
    )
    sessions = Session.objects.bulk_create(
        [
            Session(
                organization=organization,
                end_user=user,
                client=client_a,
                scope="scope-a" if n % 2 == 0 else "scope-b",
                session_id=f"s-{n}",
                session_tag="conversation",
            )
            for n, user in enumerate(end_users)
        ]
    )
    settings_dict = django_connection.settings_dict
    raw = psycopg.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"],
        port=settings_dict["PORT"],
        options=settings_dict["OPTIONS"]["options"],
    )

    def drop_message_indexes():
        with raw.cursor() as cursor:
            for name in MESSAGE_INDEXES:
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
        raw.commit()

    def build_message_indexes():
        timings, sizes = {}, {}
        with raw.cursor() as cursor:
            # An HNSW graph of 1M 384-dimension vectors needs about 2 GB to be built in memory;
            # with less, pgvector finishes the build on disk, several times slower.
            cursor.execute("SET maintenance_work_mem = '3GB'")
            for name, sql in MESSAGE_INDEXES.items():
                with Stopwatch() as watch:
                    cursor.execute(sql)
                    raw.commit()
                timings[name] = round(watch.seconds, 1)
                cursor.execute("SELECT pg_relation_size(%s)", [name])
                sizes[name] = cursor.fetchone()[0]
        raw.commit()
        raw.autocommit = True  # VACUUM cannot run in a transaction
        with raw.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE conversations_message")
        raw.autocommit = False
        return timings, sizes

    base_time = datetime(2024, 1, 1, tzinfo=timezone.utc)
    next_seq = [0] * users

    def message_rows(count):
        for start in range(0, count, 50_000):
            batch = min(50_000, count - start)
            texts, vectors = texts_and_vectors(rng, words, probabilities, word_matrix, batch)
            # Turns arrive a session batch at a time (25 turns of one user), as through the API.
            owners = np.repeat(rng.integers(0, users, size=batch // 25 + 1), 25)[:batch]
            now = datetime.now(timezone.utc)
            for text, vector, owner in zip(texts, vectors, owners):
                next_seq[owner] += 1
                session = sessions[owner]
                yield (
                    uuid.uuid4(),
                    now,
                    now,
                    organization.pk,
                    session.end_user_id,
                    session.scope,
                    session.pk,
                    next_seq[owner],
                    "user",
                    "",
                    text,
                    "",
                    Jsonb({}),
                    False,
                    base_time + timedelta(minutes=next_seq[owner]),
                    client_a.pk,
                    vector,
                    "hash-384",
                    "",
                )

    def skill_rows(count):
        # `count` skills in scope-a, the reader's scope, and a tenth as many in scope-b that its
        # retrievals must filter out.
        texts, vectors = texts_and_vectors(rng, words, probabilities, word_matrix, count + count // 10, 20, 60)
        now = datetime.now(timezone.utc)
        for n, (text, vector) in enumerate(zip(texts, vectors)):
            name_words = text.split()[:3]
            yield (
                uuid.uuid4(),
                now,
                now,
                organization.pk,
                "scope-a" if n < count else "scope-b",
                f"{'-'.join(name_words)}-{n}",
                " ".join(text.split()[:12]),
                text,
                Jsonb(name_words),
                Jsonb([]),
                "workflow",
                "active",
                1,
                [],
                vector,
                "hash-384",
                True,  # served to every user of its scope
                [],
            )

    def direct(source, query, filters, limit, client):
        """The engine's own SQL, executed with plain psycopg (no Django, no HTTP)."""
        sql, sql_params = engine.search_sql(
            source, reader=client.reader, query=query, method="hybrid", limit=limit, filters=filters
        )
        with Stopwatch() as watch, raw.cursor() as cursor:
            cursor.execute(sql, sql_params)
            cursor.fetchall()
        raw.commit()
        return watch.ms

    def measure(stage: str) -> dict:
        query_rng = np.random.default_rng(11)
        queries = [" ".join(rng_words) for rng_words in query_rng.choice(words[:2000], size=(QUERIES, 3))]
        owners = [f"user-{n}" for n in query_rng.integers(0, users, size=QUERIES) if n % 2 == 0]  # scope-a users
        pairs = list(zip(queries, owners))
        api_search, sql_search, api_retrieve, sql_retrieve, api_context, floor = [], [], [], [], [], []
        # The statement the API runs: with a reranker, it ranks RERANK_CANDIDATES items to rerank.
        candidates = max(10, settings.RERANK_CANDIDATES) if settings.RERANKER != "none" else 10
        sql_candidates = []
        for warm in pairs[:10]:  # warm the caches and connections
            http.post(
                "/api/v1/memory/search",
                json={
                    "user_id": warm[1],
                    "query": warm[0],
                    "search_method": "hybrid",
                    "memory_types": ["message"],
                    "limit": 10,
                },
                headers={"Authorization": f"Api-Key {reader_key}"},
            )
        # The API and the direct SQL each get their own users and queries, alternately, so
        # neither finds pages the other just read.
        sql_rng = np.random.default_rng(13)
        sql_queries = [" ".join(rng_words) for rng_words in sql_rng.choice(words[:2000], size=(len(pairs), 3))]
        sql_owners = [f"user-{2 * n}" for n in sql_rng.integers(0, users // 2, size=len(pairs))]
        for (query, owner), sql_query, sql_owner in zip(pairs, sql_queries, sql_owners):
            with Stopwatch() as watch:
                response = http.post(
                    "/api/v1/memory/search",
                    json={
                        "user_id": owner,
                        "query": query,
                        "search_method": "hybrid",
                        "memory_types": ["message"],
                        "limit": 10,
                    },
                    headers={"Authorization": f"Api-Key {reader_key}"},
                )
            api_search.append(watch.ms)
            assert response.status_code == 200, response.text
            # The floor under every API call: an authenticated, rate-limited request that reads nothing.
            with Stopwatch() as watch:
                response = http.get("/api/v1/me", headers={"Authorization": f"Api-Key {reader_key}"})
            floor.append(watch.ms)
            assert response.status_code == 200, response.text
            sql_search.append(direct(SOURCES["message"], sql_query, {"user_id": sql_owner}, 10, reader))
            sql_candidates.append(direct(SOURCES["message"], sql_query, {"user_id": sql_owner}, candidates, reader))
            with Stopwatch() as watch:
                response = http.post(
                    "/api/v1/memory/context",
                    json={"user_id": owner, "query": query, "max_tokens": 1000},
                    headers={"Authorization": f"Api-Key {reader_key}"},
                )
            api_context.append(watch.ms)
            assert response.status_code == 200, response.text
            with Stopwatch() as watch:
                response = http.post(
                    "/api/v1/skills/retrieve",
                    json={"task": query, "k": 5},
                    headers={"Authorization": f"Api-Key {reader_key}"},
                )
            api_retrieve.append(watch.ms)
            assert response.status_code == 200, response.text
            sql_retrieve.append(direct(SOURCES["procedural"], sql_query, {}, 5, reader))
        figures = {
            "search_api_ms": percentiles(api_search),
            "search_sql_ms": percentiles(sql_search),
            "search_sql_candidates_ms": percentiles(sql_candidates),
            "search_sql_candidates": candidates,
            "request_floor_ms": percentiles(floor),
            "retrieve_api_ms": percentiles(api_retrieve),
            "retrieve_sql_ms": percentiles(sql_retrieve),
            "context_api_ms": percentiles(api_context),
            "queries": len(pairs),
        }
        figures["context_over_search"] = {
            key: round(figures["context_api_ms"][key] / figures["search_api_ms"][key], 2) for key in ("p50", "p95")
        }
        print(
            f"scale [{stage}]: search API p50 {figures['search_api_ms']['p50']} ms (SQL {figures['search_sql_ms']['p50']} ms, "
            f"with its {candidates} candidates {figures['search_sql_candidates_ms']['p50']} ms; "
            f"an authenticated request that reads nothing {figures['request_floor_ms']['p50']} ms), "
            f"retrieve API p50/p95 {figures['retrieve_api_ms']['p50']}/{figures['retrieve_api_ms']['p95']} ms "
            f"(SQL {figures['retrieve_sql_ms']['p50']}/{figures['retrieve_sql_ms']['p95']} ms), "
            f"context API p50/p95 {figures['context_api_ms']['p50']}/{figures['context_api_ms']['p95']} ms "
            f"({figures['context_over_search']['p95']}x search at p95)",
            flush=True,
        )
        return figures

    results = {"users": users, "skills": skills, "stages": {}}
    try:
        with (
            api_server(workers=2, threads=2) as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            with raw.cursor() as cursor:
                cursor.execute(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'skills_skill'"
                    " AND (indexdef LIKE '%%USING hnsw%%' OR indexdef LIKE '%%USING gin%%')"
                )
                skill_indexes = dict(cursor.fetchall())
                for name in skill_indexes:
                    cursor.execute(f"DROP INDEX {name}")
            raw.commit()
            with Stopwatch() as watch:
                _copy_skills(raw, skill_rows(skills))
            results["skills_load_seconds"] = round(watch.seconds, 1)
            results["skill_index_build_seconds"] = {}
            with raw.cursor() as cursor:
                cursor.execute("SET maintenance_work_mem = '3GB'")
                for name, definition in skill_indexes.items():
                    with Stopwatch() as watch:
                        cursor.execute(definition)
                        raw.commit()
                    results["skill_index_build_seconds"][name] = round(watch.seconds, 1)
            raw.commit()
            raw.autocommit = True  # VACUUM cannot run in a transaction
            with raw.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE skills_skill")
            raw.autocommit = False
            loaded = 0
            for stage in sorted({min(100_000, messages), messages}):
                drop_message_indexes()
                with Stopwatch() as watch:
                    _copy_messages(raw, message_rows(stage - loaded))
                load_seconds = watch.seconds
                loaded = stage
                timings, sizes = build_message_indexes()
                print(f"scale [{stage} messages]: loaded in {load_seconds:.0f}s, index builds {timings}", flush=True)
                results["stages"][str(stage)] = {
                    "messages": stage,
                    "load_seconds": round(load_seconds, 1),
                    "index_build_seconds": timings,
                    "index_bytes": sizes,
                    **measure(f"{stage} messages"),
                }
    finally:
        raw.close()

    stages = [results["stages"][key] for key in sorted(results["stages"], key=int)]
    last = stages[-1]
    results["api_over_sql_search_p50"] = round(last["search_api_ms"]["p50"] / last["search_sql_ms"]["p50"], 2)
    results["api_over_candidates_sql_search_p50"] = round(
        last["search_api_ms"]["p50"] / last["search_sql_candidates_ms"]["p50"], 2
    )
    results["api_over_sql_retrieve_p50"] = round(last["retrieve_api_ms"]["p50"] / last["retrieve_sql_ms"]["p50"], 2)
    results["api_over_sql_retrieve_p95"] = round(last["retrieve_api_ms"]["p95"] / last["retrieve_sql_ms"]["p95"], 2)
    if len(stages) > 1:
        results["search_p50_growth_from_first_stage"] = round(
            last["search_api_ms"]["p50"] / stages[0]["search_api_ms"]["p50"], 2
        )
    results["targets"] = {
        "api_over_sql_at_most": 2.0,
        "hybrid_p50_under_ms": 50,
        "growth_at_most": 2.0,
        "context_over_search_p95_at_most": 2.0,
        "retrieve_p95_under_ms": 100,
    }
    results["meets"] = {
        "api_over_sql_search": results["api_over_sql_search_p50"] <= 2.0,
        "api_over_sql_retrieve": results["api_over_sql_retrieve_p50"] <= 2.0,
        "retrieve_p95_under_100ms": last["retrieve_api_ms"]["p95"] < 100,
        "hybrid_p50_under_50ms": last["search_api_ms"]["p50"] < 50,
        "growth": results.get("search_p50_growth_from_first_stage", 1.0) <= 2.0,
        "context_over_search_p95": all(stage["context_over_search"]["p95"] <= 2.0 for stage in stages),
    }
    write_result(output_dir, "scale", results)
    print(json.dumps({key: value for key, value in results.items() if key != "stages"}), flush=True)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
