"""Topic pages on LOCOMO: how many pages a conversation makes, how often they cite the evidence of
open-domain questions, and whether searching them beside the turns finds more of it.

Each dev conversation is ingested as in bench/retrieval/locomo.py (raw turns, dated sessions, named
speakers), embedded by the pipeline's handler, and its user's topics compiled offline
(`owner_topics_compile`, LLM_PROVIDER=rules) with the configured TOPIC_* settings. Reported:
topic pages per conversation, the ε it clustered with (derived from its items unless
TOPIC_CLUSTER_EPS is set) and the share of turns left as noise; for category 3 (open-domain)
questions, the share whose evidence a topic page cites (any of it, and all of it); and recall@10
of hybrid search, every category, `message` alone against `message` + `topic`. A topic hit counts
the turns it cites in its rank, so two recalls are given: over the first 10 hits (a page may bring
many turns: `turns returned` says how many) and over the first 10 turns of that ranking (the same
number of turns as `message` alone returns). BENCH_TOPICS_CONVERSATIONS=N keeps the first N
conversations (default all five).
"""

import os
import statistics
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import Stopwatch, run_pending_tasks, write_result
from bench.data import CATEGORIES, ingest, load, scored_questions
from bench.retrieval.locomo import cited_ranking, recall, sample_search

K = 10
OPEN_DOMAIN = 3


def _mean(values) -> float:
    values = list(values)
    return round(statistics.mean(values), 4) if values else 0.0


def run(output_dir: Path, *, log=print) -> dict:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    from django.conf import settings
    from django.test import override_settings

    from apps.conversations.models import Message
    from apps.profiles.models import Profile
    from apps.profiles.services.topics import owner_topics_compile
    from apps.providers.embeddings import embedding_model_name
    from apps.tenancy.models import EndUser, Organization
    from apps.tenancy.services import client_create, organization_create

    samples = load("locomo-dev.json")
    samples = samples[: int(os.environ.get("BENCH_TOPICS_CONVERSATIONS") or len(samples))]
    organization = organization_create(name=f"bench-topics-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    variants = ("message", "message+topic")
    recalls = {variant: defaultdict(list) for variant in variants}
    recalls_turns = defaultdict(list)
    returned = []
    cited_any, cited_all = [], []
    per_conversation = []
    compile_seconds = 0.0
    try:
        with override_settings(LLM_PROVIDER="rules"):
            for sample in samples:
                texts = ingest(client, sample)
                run_pending_tasks(organization, task_types=["embed_messages"])
                end_user = EndUser.objects.get(organization=organization, user_id=sample["sample_id"])
                with Stopwatch() as watch:
                    result = owner_topics_compile(end_user=end_user, scope="bench", reason="bench")
                compile_seconds += watch.seconds
                dia_by_message = {
                    str(pk): metadata.get("dia_id")
                    for pk, metadata in Message.objects.filter(
                        organization=organization, end_user=end_user
                    ).values_list("pk", "metadata")
                }
                pages = list(Profile.objects.filter(end_user=end_user, kind="topic", status="active"))
                cited = {dia_by_message.get(ref["item_id"]) for page in pages for ref in page.source_refs}
                per_conversation.append(
                    {
                        "conversation": sample["sample_id"],
                        "turns": len(texts),
                        "items": result["items"],
                        "eps": result["eps"],
                        "pages": len(pages),
                        "noise": result["noise"],
                        "cited_turns": len(cited - {None}),
                        "labels": sorted(page.name for page in pages),
                    }
                )
                for qa, evidence in scored_questions(sample, set(texts)):
                    if qa["category"] == OPEN_DOMAIN:
                        cited_any.append(bool(set(evidence) & cited))
                        cited_all.append(set(evidence) <= cited)
                    for variant in variants:
                        hits = sample_search(client, sample, qa["question"], memory_types=variant.split("+"), limit=K)
                        ranking = cited_ranking(hits, dia_by_message)
                        recalls[variant][qa["category"]].append(recall(ranking, evidence, len(ranking) or K))
                        if variant == "message+topic":
                            recalls_turns[qa["category"]].append(recall(ranking, evidence, K))
                            returned.append(len(ranking))
                log(
                    f"{sample['sample_id']}: {len(texts)} turns, ε {result['eps']}, {len(pages)} topic pages, "
                    f"{result['noise']} noise"
                )
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    def table(by_category: dict) -> dict:
        return {
            "overall": _mean(v for values in by_category.values() for v in values),
            **{str(category): _mean(by_category[category]) for category in CATEGORIES},
        }

    turns = sum(row["turns"] for row in per_conversation)
    results = {
        "embedding_model": embedding_model_name(),
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "topic_cluster_eps": settings.TOPIC_CLUSTER_EPS,  # None: each owner's own, derived
        "topic_cluster_eps_percentile": settings.TOPIC_CLUSTER_EPS_PERCENTILE,
        "topic_cluster_min_items": settings.TOPIC_CLUSTER_MIN_ITEMS,
        "topic_max_evidence": settings.TOPIC_MAX_EVIDENCE,
        "conversations": per_conversation,
        "pages_per_conversation": _mean(row["pages"] for row in per_conversation),
        "noise_share": round(
            sum(row["noise"] for row in per_conversation) / max(1, sum(r["items"] for r in per_conversation)), 4
        ),
        "open_domain_questions": len(cited_any),
        "open_domain_evidence_cited_any": _mean(cited_any),
        "open_domain_evidence_cited_all": _mean(cited_all),
        "compile_seconds_per_1000_turns_offline": round(compile_seconds * 1000 / max(turns, 1), 2),
        f"recall@{K}_hits": {variant: table(by_category) for variant, by_category in recalls.items()},
        f"recall@{K}_turns": {"message": table(recalls["message"]), "message+topic": table(recalls_turns)},
        "turns_returned_by_message+topic": _mean(returned),
    }
    eps = results["topic_cluster_eps"]
    how = (
        f"ε {eps} (TOPIC_CLUSTER_EPS)"
        if eps is not None
        else f"ε derived at p{results['topic_cluster_eps_percentile']:g}"
    )
    log(
        f"\n{len(per_conversation)} conversations ({results['embedding_model']}, {how}): "
        f"{results['pages_per_conversation']} topic pages each, noise {results['noise_share']:.0%}"
    )
    log(
        f"open-domain questions ({results['open_domain_questions']}): evidence cited by a topic page "
        f"{results['open_domain_evidence_cited_any']:.1%} (any), {results['open_domain_evidence_cited_all']:.1%} (all)"
    )
    for name in (f"recall@{K}_hits", f"recall@{K}_turns"):
        for variant, row in results[name].items():
            log(f"  {name:<15} {variant:<14} overall {row['overall']:.3f}  c3 {row['3']:.3f}")
    log(f"written to {write_result(output_dir, 'topics', results)}")
    return results
