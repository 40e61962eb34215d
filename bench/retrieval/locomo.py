"""LOCOMO retrieval benchmark: evidence recall@k of the platform's search against raw baselines.

For each conversation a fresh end user is created and every session is ingested as a
`conversation` session through the ingest service (dia_id in the turn metadata, the session
date as occurred_at, image captions appended to the text). Embeddings are computed by the
pipeline's own handler. Each question of categories 1-4 with evidence is then searched
among that user's messages, and recall@k is the share of its evidence dia_ids in the top k.
The baselines run on the same turns: BM25 (rank_bm25 Okapi), exact cosine over the same
embeddings, and their reciprocal-rank fusion. Each method is also measured with each reranker
(`method+context`: the rerank stage over its best RERANK_CANDIDATES), and `run_providers` repeats
everything for each local embedding provider. With an LLM configured (LLM_PROVIDER=openai and
its endpoint), `hybrid+decompose` variants search each question with QUERY_DECOMPOSER=llm too
(the share of questions the model split is reported); without one they are left out.

`python -m bench locomo` runs it for each provider of BENCH_EMBEDDING_PROVIDERS (default `e5,local`) on
BENCH_DATA_DIR's dev set; `python -m bench.retrieval.locomo FILE [--extract]` on any LOCOMO-format file.
"""

import json
import os
import re
import statistics
import sys
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import RESULTS_DIR, Stopwatch, percentiles, run_pending_tasks, write_json, write_result
from bench.data import CATEGORIES, data_file, ingest, scored_questions

KS = (1, 5, 10, 25)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def rrf_scores(rankings: list[list], weights: list[float] | None = None, k: int = 60) -> list[tuple]:
    """(item, score) best first: reciprocal-rank fusion, each ranking weighted (default 1)."""
    scores = defaultdict(float)
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings)):
        for rank, item in enumerate(ranking, start=1):
            scores[item] += weight / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


def rrf(*rankings: list[str], k: int = 60) -> list[str]:
    return [item for item, _ in rrf_scores(list(rankings), k=k)]


def recall(ranked: list[str], evidence: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def add_recalls(scores: dict, *, category, ranking: list[str], evidence: list[str]) -> None:
    """Appends the recall@k of `ranking` for each k of KS to `scores[(category, k)]`."""
    for k in KS:
        scores[(category, k)].append(recall(ranking, evidence, k))


def sample_search(
    client, sample: dict, question: str, *, memory_types=("message",), method="hybrid", limit=None, **options
):
    """The platform's search of one LOCOMO conversation's memories (its user's), as the benchmarks ask
    it: the top `limit` (default max(KS)) of `memory_types`; `options` go to the engine."""
    from apps.search.engine import search

    return search(
        reader=client.reader,
        query=str(question),
        memory_types=list(memory_types),
        method=method,
        limit=limit or max(KS),
        filters={"user_id": sample["sample_id"]},
        **options,
    )


def timed_sample_search(client, sample: dict, question: str, **options) -> tuple:
    """`sample_search`, timed: (hits, milliseconds)."""
    with Stopwatch() as watch:
        hits = sample_search(client, sample, question, **options)
    return hits, watch.ms


def dia_ranking(hits, dia_by_message: dict, *, turns_of) -> list[str]:
    """dia_ids in rank order: a turn gives its own, any other item those of the turns `turns_of(item)`
    names (keys of `dia_by_message`)."""
    ranking = []
    for hit in hits:
        if hit.source.memory_type == "message":
            dia_ids = [hit.instance.metadata.get("dia_id")]
        else:
            dia_ids = [dia_by_message.get(message_id) for message_id in turns_of(hit.instance)]
        for dia_id in dia_ids:
            if dia_id and dia_id not in ranking:
                ranking.append(dia_id)
    return ranking


def cited_ranking(hits, dia_by_message: dict) -> list[str]:
    """dia_ids in rank order: a turn gives its own, a page (profile or topic) those of the turns it cites."""
    return dia_ranking(
        hits,
        dia_by_message,
        turns_of=lambda page: [ref["item_id"] for ref in page.source_refs if ref["item_type"] == "message"],
    )


def evaluate(  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    file: str,
    *,
    methods=("bm25", "embedding", "hybrid", "fuzzy"),
    rerankers=("none", "context"),
    decompose: bool | None = None,
    output: str | None = None,
    log=print,
) -> dict:
    import numpy as np
    from django.conf import settings
    from rank_bm25 import BM25Okapi

    from apps.conversations.models import Message
    from apps.providers.embeddings import embed_query, embedding_model_name
    from apps.providers.llm import llm_enabled
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    decompose = llm_enabled() if decompose is None else decompose
    samples = json.loads(Path(file).read_text())
    organization = organization_create(name=f"bench-locomo-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    variants = [(method, reranker, "none") for method in methods for reranker in rerankers]
    if decompose:
        variants += [("hybrid", reranker, "llm") for reranker in rerankers]
    decomposed = defaultdict(int)

    def variant_name(method, reranker, decomposer="none"):
        return method + ("" if reranker == "none" else f"+{reranker}") + ("" if decomposer == "none" else "+decompose")

    per_method = {
        name: defaultdict(list)
        for name in (
            *(variant_name(*variant) for variant in variants),
            "baseline_bm25",
            "baseline_dense",
            "baseline_rrf",
        )
    }
    latencies = defaultdict(list)
    ingest_seconds = embed_seconds = 0.0
    questions = 0
    try:
        for sample in samples:
            with Stopwatch() as watch:
                texts = ingest(client, sample)
            ingest_seconds += watch.seconds
            with Stopwatch() as watch:
                # Raw turns only: extraction (dates, memories) is measured by run_extract (--extract).
                run_pending_tasks(organization, task_types=["embed_messages"])
            embed_seconds += watch.seconds

            rows = list(
                Message.objects.filter(organization=organization, end_user__user_id=sample["sample_id"]).values_list(
                    "metadata", "content", "embedding"
                )
            )
            dia_ids = [metadata["dia_id"] for metadata, _, _ in rows]
            bm25 = BM25Okapi([_tokens(content) for _, content, _ in rows])
            matrix = np.array([embedding for _, _, embedding in rows], dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)

            for qa, evidence in scored_questions(sample, set(texts)):
                questions += 1
                question = str(qa["question"])
                category = qa["category"]

                bm25_rank = [dia_ids[i] for i in np.argsort(-bm25.get_scores(_tokens(question)))[:100]]
                query_vector = np.array(embed_query(question), dtype=np.float32)
                dense_rank = [dia_ids[i] for i in np.argsort(-(matrix @ query_vector))[:100]]
                for name, ranking in (
                    ("baseline_bm25", bm25_rank),
                    ("baseline_dense", dense_rank),
                    ("baseline_rrf", rrf(bm25_rank, dense_rank)),
                ):
                    add_recalls(per_method[name], category=category, ranking=ranking, evidence=evidence)

                for method, reranker, decomposer in variants:
                    name = variant_name(method, reranker, decomposer)
                    hits, milliseconds = timed_sample_search(
                        client, sample, question, method=method, reranker=reranker, decomposer=decomposer
                    )
                    latencies[name].append(milliseconds)
                    decomposed[name] += hits.decomposed_into is not None
                    ranking = [hit.instance.metadata.get("dia_id") for hit in hits]
                    add_recalls(per_method[name], category=category, ranking=ranking, evidence=evidence)
            log(f"{sample['sample_id']}: {len(rows)} turns, {questions} questions so far")
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    results = {
        "file": str(file),
        "questions": questions,
        "embedding_model": embedding_model_name(),
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "rerank_candidates": settings.RERANK_CANDIDATES,
        "ingest_seconds": round(ingest_seconds, 2),
        "embed_seconds": round(embed_seconds, 2),
        "methods": {},
    }
    for name, values in per_method.items():
        overall = {
            f"recall@{k}": round(statistics.mean(v for (c, kk), vs in values.items() if kk == k for v in vs), 4)
            for k in KS
        }
        by_category = {
            str(category): {
                f"recall@{k}": round(statistics.mean(values[(category, k)]), 4) for k in KS if values[(category, k)]
            }
            for category in CATEGORIES
        }
        entry = {"overall": overall, "by_category": by_category}
        if name in latencies:
            entry["latency_ms"] = percentiles(latencies[name])
        if name in decomposed and name.endswith("+decompose"):
            entry["decomposed_share"] = round(decomposed[name] / max(questions, 1), 4)
        results["methods"][name] = entry

    log(f"\nLOCOMO evidence recall ({questions} questions, categories 1-4, {results['embedding_model']})")
    log(f"{'method':<20}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'p50 ms':>9}{'p95 ms':>9}")
    for name, entry in results["methods"].items():
        latency = entry.get("latency_ms", {})
        log(
            f"{name:<20}"
            + "".join(f"{entry['overall'][f'recall@{k}']:>8.3f}" for k in KS)
            + f"{latency.get('p50', ''):>9}{latency.get('p95', ''):>9}"
        )
    log("recall@10 by category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):")
    for name, entry in results["methods"].items():
        log(
            f"  {name:<20}"
            + " ".join(f"c{c}={entry['by_category'][str(c)].get('recall@10', 0):.3f}" for c in CATEGORIES)
        )
    if output:
        log(f"written to {write_json(output, results)}")
    return results


# Each embedding provider's default model, for running one provider after another in one process.
PROVIDER_MODELS = {
    "local": "all-MiniLM-L6-v2",
    "e5": "multilingual-e5-small-q4",
    "openai": "text-embedding-3-small",
    "hash": "",
}


# Providers that need no network: the rows a default may be chosen from.
OFFLINE_PROVIDERS = ("e5", "local", "hash")


def provider_available(provider: str) -> str | None:
    """Why a provider cannot run in this install, or None."""
    import importlib.util

    if provider == "local" and importlib.util.find_spec("sentence_transformers") is None:
        return "needs torch and sentence-transformers (`make bench` installs them)"
    if provider == "openai":
        from django.conf import settings

        if not settings.OPENAI_API_KEY:
            return "needs OPENAI_API_KEY"
    return None


def defaults_row(results: dict, *, provider: str, reranker: str) -> dict:
    """The row the default configuration produces (its provider, a message search's default method and
    its reranker) beside the best row of any offline provider, so a regression of the defaults shows."""
    from apps.search.registry import SOURCES

    method = SOURCES["message"].default_method
    name = method if reranker == "none" else f"{method}+{reranker}"
    rows = {
        (row_provider, row_name): entry["overall"]["recall@10"]
        for row_provider, result in results.items()
        if row_provider in OFFLINE_PROVIDERS
        for row_name, entry in result["methods"].items()
        if not row_name.startswith("baseline_") and not row_name.endswith("+decompose")
    }
    best = max(rows, key=rows.get) if rows else None
    return {
        "provider": provider,
        "method": name,
        "recall@10": rows.get((provider, name)),
        "best": {"provider": best[0], "method": best[1], "recall@10": rows[best]} if best else None,
        "is_best": best is not None and rows.get((provider, name)) == rows[best],
    }


def run_providers(file: str, *, providers=("e5", "local"), output_dir: str | None = None, log=print, **options) -> dict:
    """`run` once per embedding provider (in this process, each with its default model); a provider this
    install cannot run is reported and left out. Ends with the defaults' row against the best."""
    from django.conf import settings
    from django.test import override_settings

    default_provider, default_reranker = settings.EMBEDDING_PROVIDER, settings.RERANKER
    results = {}
    for provider in providers:
        missing = provider_available(provider)
        if missing:
            log(f"{provider}: left out, it {missing}")
            continue
        with override_settings(
            EMBEDDING_PROVIDER=provider, EMBEDDING_MODEL=PROVIDER_MODELS.get(provider, settings.EMBEDDING_MODEL)
        ):
            output = str(Path(output_dir) / f"locomo-{provider}.json") if output_dir else None
            results[provider] = evaluate(file, output=output, log=log, **options)
    log(
        "\nhybrid recall@10 per provider (overall / c1 multi-hop / c2 temporal / c3 open-domain / c4 single-hop), p50 ms"
    )
    for provider, result in results.items():
        for name, entry in result["methods"].items():
            if name.startswith("hybrid"):
                log(
                    f"  {provider:<6} {name:<16} {entry['overall']['recall@10']:.3f} / "
                    + " / ".join(f"{entry['by_category'][str(c)].get('recall@10', 0):.3f}" for c in CATEGORIES)
                    + f"   p50 {entry['latency_ms']['p50']}"
                )
    defaults = defaults_row(results, provider=default_provider, reranker=default_reranker)
    best = defaults["best"]
    log(
        f"\ndefaults (EMBEDDING_PROVIDER={default_provider}, RERANKER={default_reranker}, {defaults['method']}): "
        + (
            "not measured (provider left out)"
            if defaults["recall@10"] is None
            else f"recall@10 {defaults['recall@10']:.3f}"
        )
        + (f"; best offline row: {best['provider']} {best['method']} {best['recall@10']:.3f}" if best else "")
        + (" (the defaults are the best offline row)" if defaults["is_best"] else "")
    )
    if output_dir:
        write_result(output_dir, "locomo-defaults", defaults)
    return {**results, "defaults": defaults}


def run(output_dir) -> dict:
    """Every method with and without the context reranker, for each local embedding provider
    (BENCH_EMBEDDING_PROVIDERS, default `e5,local`; `local` needs the bench extra), then the row of the
    default configuration against the best offline row."""
    providers = tuple(os.environ.get("BENCH_EMBEDDING_PROVIDERS", "e5,local").split(","))
    return run_providers(str(data_file("locomo-dev.json")), providers=providers, output_dir=str(output_dir))


# Extraction mode -------------------------------------------------------------------------------

EXTRACT_VARIANTS = ("messages_before_extraction", "messages_after_extraction", "messages_episodic_semantic")


def run_extract(file: str, *, methods=("hybrid",), output: str | None = None, log=print) -> dict:
    """Recall@k before and after extraction, and when searching messages + episodic + semantic together.

    Per conversation: ingest, run the embedding tasks, search the messages (before); run the
    extraction tasks through whatever LLM is configured (LLM_PROVIDER=rules: the temporal
    normaliser only), search the messages again (after: with resolved dates in their keyword
    context) and all three memory types together (memories count through their source turns).
    """
    from django.conf import settings

    from apps.conversations.models import Message
    from apps.memories.models import EpisodicMemory, SemanticMemory
    from apps.providers.embeddings import embedding_model_name
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    samples = json.loads(Path(file).read_text())
    organization = organization_create(name=f"bench-locomo-extract-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    scores = {(variant, method): defaultdict(list) for variant in EXTRACT_VARIANTS for method in methods}
    extraction = {"seconds": 0.0, "turns": 0, "dates_resolved": 0, "episodic": 0, "semantic": 0}
    questions = 0

    def score(sample, variant, memory_types, texts, dia_by_message):
        for qa, evidence in scored_questions(sample, set(texts)):
            for method in methods:
                hits = sample_search(client, sample, qa["question"], memory_types=memory_types, method=method)
                # A memory gives the turns it was learned from.
                ranking = dia_ranking(hits, dia_by_message, turns_of=lambda memory: memory.source_message_ids)
                add_recalls(scores[(variant, method)], category=qa["category"], ranking=ranking, evidence=evidence)

    try:
        for sample in samples:
            texts = ingest(client, sample)
            run_pending_tasks(organization, task_types=["embed_messages"])
            user_messages = Message.objects.filter(organization=organization, end_user__user_id=sample["sample_id"])
            dia_by_message = {
                pk: metadata.get("dia_id") for pk, metadata in user_messages.values_list("pk", "metadata")
            }
            score(sample, "messages_before_extraction", ["message"], texts, dia_by_message)

            with Stopwatch() as watch:
                run_pending_tasks(organization)
            extraction["seconds"] += watch.seconds
            resolved = user_messages.filter(metadata__has_key="resolved_date").count()
            extraction["dates_resolved"] += resolved
            extraction["turns"] += len(dia_by_message)
            score(sample, "messages_after_extraction", ["message"], texts, dia_by_message)
            score(sample, "messages_episodic_semantic", ["message", "episodic", "semantic"], texts, dia_by_message)
            questions += sum(1 for _ in scored_questions(sample, set(texts)))
            log(
                f"{sample['sample_id']}: {len(dia_by_message)} turns, {resolved} with resolved dates, {questions} questions so far"
            )
        for name, model in (("episodic", EpisodicMemory), ("semantic", SemanticMemory)):
            extraction[name] = model.objects.filter(organization=organization, deleted_at__isnull=True).count()
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    results = {
        "file": str(file),
        "mode": "extract",
        "questions": questions,
        "llm_provider": settings.LLM_PROVIDER,
        "llm_model": settings.LLM_MODEL if settings.LLM_PROVIDER != "rules" else None,
        "embedding_model": embedding_model_name(),
        "extraction": {**extraction, "seconds": round(extraction["seconds"], 2)},
        "variants": {},
    }
    for (variant, method), values in scores.items():
        results["variants"][f"{variant}/{method}"] = {
            "overall": {
                f"recall@{k}": round(statistics.mean(v for (c, kk), vs in values.items() if kk == k for v in vs), 4)
                for k in KS
            },
            "by_category": {
                str(category): {
                    f"recall@{k}": round(statistics.mean(values[(category, k)]), 4) for k in KS if values[(category, k)]
                }
                for category in CATEGORIES
            },
        }

    log(
        f"\nLOCOMO with extraction ({questions} questions, categories 1-4, LLM {settings.LLM_PROVIDER}, {results['embedding_model']})"
    )
    log(f"extraction: {results['extraction']}")
    log(f"{'variant/method':<40}" + "".join(f"{'R@' + str(k):>8}" for k in KS) + f"{'c2 R@10':>9}")
    for name, entry in results["variants"].items():
        log(
            f"{name:<40}"
            + "".join(f"{entry['overall'][f'recall@{k}']:>8.3f}" for k in KS)
            + f"{entry['by_category']['2'].get('recall@10', 0):>9.3f}"
        )
    for method in methods:
        before = results["variants"][f"messages_before_extraction/{method}"]["by_category"]["2"]
        after = results["variants"][f"messages_after_extraction/{method}"]["by_category"]["2"]
        log(
            f"category 2 (temporal), {method}, messages without -> with resolved dates: "
            + ", ".join(f"R@{k} {before[f'recall@{k}']:.3f} -> {after[f'recall@{k}']:.3f}" for k in KS)
        )
    if output:
        log(f"written to {write_json(output, results)}")
    return results


def main(argv: list[str]) -> int:
    """`python -m bench.retrieval.locomo FILE [--extract] [--methods M1,M2] [--output PATH]`: the
    benchmark on one LOCOMO-format file (`python -m bench locomo` runs it on BENCH_DATA_DIR's)."""
    import argparse

    import django

    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.locomo", description=main.__doc__)
    parser.add_argument("file", help="A LOCOMO-format JSON file, e.g. ../shared/data/locomo-dev.json")
    parser.add_argument("--methods", default=None, help="default: bm25,embedding,hybrid,fuzzy (with --extract: hybrid)")
    parser.add_argument(
        "--output", default=None, help="default: bench/results/locomo.json (with --extract: locomo-extract.json)"
    )
    parser.add_argument(
        "--extract",
        action="store_true",
        help="run memory extraction with the configured LLM (rules: the temporal normaliser) and report recall "
        "before and after it, and over messages + episodic + semantic",
    )
    arguments = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if arguments.extract:
        run_extract(
            arguments.file,
            methods=tuple((arguments.methods or "hybrid").split(",")),
            output=arguments.output or str(RESULTS_DIR / "locomo-extract.json"),
        )
    else:
        evaluate(
            arguments.file,
            methods=tuple((arguments.methods or "bm25,embedding,hybrid,fuzzy").split(",")),
            output=arguments.output or str(RESULTS_DIR / "locomo.json"),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
