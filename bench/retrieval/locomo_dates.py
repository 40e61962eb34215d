"""LOCOMO with time windows: does a time named in a question ("in May 2022", "last June") help
when it filters the search or boosts what falls within it?

Per conversation: ingest every session (the session date as each turn's occurred_at), index the
turns (the embedding handler dates them), run the `normalize_dates` pass over the user (it should
find nothing left to change: that is reported), then search every question of categories 1-4
with SEARCH_TIME_WINDOW off, filter and boost, with the default `context` reranker (and others
with `rerankers`). A question naming no time is searched once: without a window the three modes are
the same search. LOCOMO questions carry no "now": the reference time of a question is the
conversation's last session date (when, in the story, the questions are asked).

Reported: recall@k overall, per category (2 is temporal) and over the questions that named a
time (the only ones a window changes), and how many those were. `python -m bench locomo_dates`.
"""

import json
import statistics
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import Stopwatch, percentiles, run_pending_tasks, write_json
from bench.data import CATEGORIES, conversation_sessions, data_file, ingest, scored_questions
from bench.retrieval.locomo import KS, add_recalls, timed_sample_search

MODES = ("off", "filter", "boost")
RERANKERS = ("context",)
WINDOWED = "windowed"


def run(output_dir) -> dict:
    """The LOCOMO dev set, with the configured embedding provider (e5 by default)."""
    return evaluate(str(data_file("locomo-dev.json")), output=str(Path(output_dir) / "locomo-dates.json"))


def evaluate(file: str, *, method: str = "hybrid", rerankers=RERANKERS, output: str | None = None, log=print) -> dict:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    from django.conf import settings

    from apps.core.temporal import query_window
    from apps.memories.services.dates import dates_normalize
    from apps.providers.embeddings import embedding_model_name
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    samples = json.loads(Path(file).read_text())
    organization = organization_create(name=f"bench-locomo-dates-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    scores = {(mode, reranker): defaultdict(list) for mode in MODES for reranker in rerankers}
    latencies = defaultdict(list)
    questions = windowed = 0
    windows = []
    normalize = {"read": 0, "changed_on_first_pass": 0, "dated_turns": 0, "seconds": 0.0}
    try:
        for sample in samples:
            texts = ingest(client, sample)
            run_pending_tasks(organization, task_types=["embed_messages"])
            with Stopwatch() as watch:
                result = dates_normalize(organization=organization, user_id=sample["sample_id"])
            normalize["seconds"] += watch.seconds
            normalize["read"] += result["message"]["read"]
            normalize["changed_on_first_pass"] += result["changed"]
            normalize["dated_turns"] += organization_dated(organization, sample["sample_id"])
            asked_at = conversation_sessions(sample["conversation"])[-1][1]
            for qa, evidence in scored_questions(sample, set(texts)):
                questions += 1
                question = str(qa["question"])
                window = query_window(question, asked_at)
                if window is not None:
                    windowed += 1
                    windows.append({"question": question, "window": [window.start.isoformat(), window.end.isoformat()]})
                for reranker in rerankers:
                    rankings = {}
                    for mode in MODES:
                        if window is None and mode != "off":
                            rankings[mode] = rankings["off"]  # no window: the same search
                            continue
                        hits, milliseconds = timed_sample_search(
                            client, sample, question, method=method, reranker=reranker, time_window=mode, now=asked_at
                        )
                        latencies[(mode, reranker)].append(milliseconds)
                        rankings[mode] = [hit.instance.metadata.get("dia_id") for hit in hits]
                    for mode, ranking in rankings.items():
                        add_recalls(
                            scores[(mode, reranker)], category=qa["category"], ranking=ranking, evidence=evidence
                        )
                        if window is not None:
                            add_recalls(scores[(mode, reranker)], category=WINDOWED, ranking=ranking, evidence=evidence)
            log(f"{sample['sample_id']}: {len(texts)} turns, {questions} questions so far ({windowed} name a time)")
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    results = {
        "file": str(file),
        "method": method,
        "questions": questions,
        "questions_naming_a_time": windowed,
        "reference_time": "the conversation's last session date",
        "embedding_model": embedding_model_name(),
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "normalize_dates": {**normalize, "seconds": round(normalize["seconds"], 2)},
        "windows": windows,
        "variants": {},
    }
    for (mode, reranker), values in scores.items():
        name = f"{method}{'' if reranker == 'none' else '+' + reranker}/window={mode}"
        results["variants"][name] = {
            "overall": {
                f"recall@{k}": _mean(v for (c, kk), vs in values.items() if kk == k and c != WINDOWED for v in vs)
                for k in KS
            },
            "by_category": {
                str(category): {f"recall@{k}": _mean(values[(category, k)]) for k in KS}
                for category in (*CATEGORIES, WINDOWED)
            },
            "latency_ms": percentiles(latencies[(mode, reranker)]),
        }

    log(
        f"\nLOCOMO recall@10 with time windows ({questions} questions, {windowed} naming a time; "
        f"{method}, {results['embedding_model']}; now = last session date)"
    )
    log(f"normalize_dates after indexing: {results['normalize_dates']}")
    log(f"{'variant':<34}{'overall':>9}{'c2 temporal':>13}{'named time':>12}{'p50 ms':>9}")
    for name, entry in results["variants"].items():
        log(
            f"{name:<34}{entry['overall']['recall@10']:>9.3f}{entry['by_category']['2']['recall@10']:>13.3f}"
            f"{entry['by_category'][WINDOWED]['recall@10']:>12.3f}{entry['latency_ms']['p50']:>9}"
        )
    if output:
        log(f"written to {write_json(output, results)}")
    return results


def organization_dated(organization, user_id: str) -> int:
    from apps.conversations.models import Message

    return Message.objects.filter(organization=organization, end_user__user_id=user_id, date_span__isnull=False).count()


def _mean(values) -> float:
    values = list(values)
    return round(statistics.mean(values), 4) if values else 0.0
