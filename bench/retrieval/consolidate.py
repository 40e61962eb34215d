"""Consolidation benchmark: seeded duplicates and paraphrases injected into one LOCOMO user's memories,
consolidated offline; merge precision and recall against the injected truth, and message+memory
recall@10 on that user's questions before injection, with the duplicates, and after consolidation.

The user's conversation is ingested and embedded (no extraction: no LLM); their memories are LOCOMO's
own observations (semantic: the speaker and the statement, sourced to the turn it cites) and event
summaries (episodic, dated by their session), written through the memory service extraction uses. A
seeded share of them gets one injected copy each, of one of three kinds:

- `exact`: the same statement, case and final punctuation changed;
- `near`: a hedge or a trailing phrase added ("Apparently, ...", "... as mentioned");
- `paraphrase`: common words swapped for synonyms and the clause order kept (a rule paraphraser).

Truth: each copy and its original are one pair. A merge group predicts every pair of its members; a
predicted pair between two originals is counted apart (LOCOMO's observations repeat themselves, so
some are real duplicates: a sample is printed for inspection). The thresholds are swept on dry runs
(nothing changes), then the default ones run for real.

`BENCH_CONSOLIDATE_SAMPLE` (default 0) picks the conversation, `BENCH_CONSOLIDATE_SHARE` (default
0.3) the share of memories copied, `BENCH_CONSOLIDATE_SEED` (default 7) the seed,
`BENCH_CONSOLIDATE_QUESTIONS` (default: all) how many of the user's questions recall@10 is measured on
(0: merges only, recall@10 not measured).
"""

import itertools
import json
import os
import random
import re
import statistics
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from bench.common import run_pending_tasks, write_result
from bench.data import data_file, ingest, scored_questions

SYNONYMS = {
    "attended": "went to",
    "enjoys": "likes",
    "likes": "enjoys",
    "loves": "adores",
    "is planning": "plans",
    "plans": "is planning",
    "wants": "would like",
    "feel": "be",
    "felt": "was",
    "kids": "children",
    "children": "kids",
    "recently": "lately",
    "happy": "glad",
    "great": "wonderful",
    "important": "significant",
    "started": "began",
    "began": "started",
    "helps": "assists",
    "help": "assist",
    "friends": "pals",
    "also": "as well",
    "big": "large",
    "got": "received",
    "makes": "gives",
    "thinks": "believes",
    "believes": "thinks",
    "hopes": "wishes",
    "currently": "right now",
    "wonderful": "great",
    "a lot": "very much",
    "picture": "photo",
    "photo": "picture",
}
HEDGES = ("Apparently, ", "It seems that ", "Notably, ")
TAILS = (", as mentioned", " (noted again)", ", as she said", ", as he said")
SWEEP_COSINE = (0.85, 0.88, 0.9, 0.92, 0.95)
SWEEP_TEXT = (0.3, 0.4, 0.5, 0.6)


def paraphrase(text: str, rng: random.Random) -> str:
    """Synonym swaps of whole words (at least one when any applies)."""
    words = [word for word in SYNONYMS if re.search(rf"\b{re.escape(word)}\b", text)]
    if not words:
        return rng.choice(HEDGES) + text[0].lower() + text[1:]
    chosen = rng.sample(words, k=max(1, len(words) // 2 + 1) if len(words) > 1 else 1)
    for word in chosen:
        text = re.sub(rf"\b{re.escape(word)}\b", SYNONYMS[word], text, count=1)
    return text


def variant(kind: str, text: str, rng: random.Random) -> str:
    if kind == "exact":
        return text.rstrip(".").lower() if rng.random() < 0.5 else text.rstrip(".").upper()
    if kind == "near":
        if rng.random() < 0.5:
            return rng.choice(HEDGES) + text[0].lower() + text[1:]
        return text.rstrip(".") + rng.choice(TAILS) + "."
    return paraphrase(text, rng)


def _dia_ranking(hits, dia_by_message: dict) -> list[str]:
    from apps.conversations.models import Message

    ranked = []
    for hit in hits:
        instance = hit.instance
        if isinstance(instance, Message):
            dias = [dia_by_message.get(instance.pk)]
        else:
            dias = [dia_by_message.get(message_id) for message_id in getattr(instance, "source_message_ids", [])]
        for dia in dias:
            if dia and dia not in ranked:
                ranked.append(dia)
    return ranked


def _recall_at_10(client, user_id: str, questions: list, dia_by_message: dict) -> float:
    from apps.search.engine import search

    scores = []
    for question, evidence in questions:
        hits = search(
            reader=client.reader,
            query=question,
            memory_types=["message", "episodic", "semantic"],
            method=None,
            limit=10,
            filters={"user_id": user_id},
        )
        ranked = _dia_ranking(hits, dia_by_message)[:10]
        scores.append(len(set(ranked) & set(evidence)) / len(evidence))
    return round(statistics.mean(scores), 4)


def _pairs(merges: list) -> set[frozenset]:
    pairs = set()
    for merge in merges:
        members = [merge["survivor"], *merge["merged"]]
        pairs |= {frozenset(pair) for pair in itertools.combinations(members, 2)}
    return pairs


def _score(predicted: set, truth: set, injected: set) -> dict:
    touching = {pair for pair in predicted if pair & injected}
    correct = predicted & truth
    return {
        "predicted_pairs": len(predicted),
        "correct": len(correct),
        "precision": round(len(correct) / len(predicted), 4) if predicted else None,
        "precision_on_injected": round(len(correct) / len(touching), 4) if touching else None,
        "recall": round(len(correct) / len(truth), 4) if truth else None,
        "between_originals": len(predicted - touching),
    }


def run(output_dir: Path, *, file: str | None = None, log=print) -> dict:
    from django.conf import settings
    from django.test import override_settings

    from apps.conversations.models import Message, Session
    from apps.conversations.routing import EMBED_MESSAGES
    from apps.memories.models import EpisodicMemory, SemanticMemory
    from apps.memories.services.consolidate import memories_consolidate
    from apps.memories.services.memories import EPISODIC, SEMANTIC, memory_create, memory_embed
    from apps.pipeline.models import MemoryTask
    from apps.tenancy.models import EndUser, Organization
    from apps.tenancy.services import client_create, organization_create

    path = Path(file) if file else data_file("locomo-dev.json")
    sample = json.loads(path.read_text())[int(os.environ.get("BENCH_CONSOLIDATE_SAMPLE", "0"))]
    share = float(os.environ.get("BENCH_CONSOLIDATE_SHARE", "0.3"))
    seed = int(os.environ.get("BENCH_CONSOLIDATE_SEED", "7"))
    rng = random.Random(seed)
    organization = organization_create(name=f"bench-consolidate-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    user_id = sample["sample_id"]
    started = time.monotonic()
    try:
        texts = ingest(client, sample)
        run_pending_tasks(organization, [EMBED_MESSAGES])
        MemoryTask.objects.filter(organization=organization).delete()  # no extraction: the memories are given
        messages = Message.objects.filter(organization=organization, end_user__user_id=user_id)
        dia_by_message = {pk: metadata.get("dia_id") for pk, metadata in messages.values_list("pk", "metadata")}
        message_by_dia = {dia: pk for pk, dia in dia_by_message.items()}
        session = Session.objects.filter(organization=organization).order_by("created_at").first()

        # LOCOMO's own memories of the user: observations (facts) and event summaries (events).
        originals = []  # (memory_type, fields, sources)
        for observations in sample["observation"].values():
            for speaker, items in observations.items():
                for text, dia in items:
                    dias = dia if isinstance(dia, list) else [dia]
                    sources = [message_by_dia[d] for d in dias if d in message_by_dia]
                    originals.append((SEMANTIC, {"name": speaker, "summary": text}, sources))
        for events in sample["event_summary"].values():
            occurred_at = datetime.strptime(events["date"].replace(",", ""), "%d %B %Y").replace(tzinfo=timezone.utc)
            for speaker, items in events.items():
                if speaker == "date":
                    continue
                for text in items:
                    originals.append((EPISODIC, {"summary": text, "actor": speaker, "occurred_at": occurred_at}, []))

        def store(entries) -> list:
            """The memories of `entries`, in their order (embedded a type at a time)."""
            stored = [None] * len(entries)
            for memory_type in (SEMANTIC, EPISODIC):
                batch = [(at, entry) for at, entry in enumerate(entries) if entry[0] == memory_type]
                vectors = memory_embed(memory_type, [entry[1] for _, entry in batch]) if batch else []
                for (at, (memory_type, fields, sources)), vector in zip(batch, vectors):
                    stored[at] = memory_create(
                        memory_type=memory_type,
                        session=session,
                        fields=fields,
                        source_message_ids=sources,
                        embedding=vector,
                        actor="bench",
                    )
            return stored

        originals_stored = store(originals)
        questions = [(str(qa["question"]), evidence) for qa, evidence in scored_questions(sample, set(texts))]
        if os.environ.get("BENCH_CONSOLIDATE_QUESTIONS"):
            questions = questions[: int(os.environ["BENCH_CONSOLIDATE_QUESTIONS"])]
        measure = (lambda: _recall_at_10(client, user_id, questions, dia_by_message)) if questions else (lambda: None)
        recall_clean = measure()
        log(f"{user_id}: {len(texts)} turns, {len(originals_stored)} memories, recall@10 {recall_clean}")

        # Inject one copy of a seeded share of the memories.
        chosen = rng.sample(originals_stored, k=round(share * len(originals_stored)))
        kinds = ("exact", "near", "paraphrase")
        copies, kind_of = [], []
        for number, original in enumerate(chosen):
            kind = kinds[number % len(kinds)]
            memory_type = SEMANTIC if isinstance(original, SemanticMemory) else EPISODIC
            fields = {"summary": variant(kind, original.summary, rng)}
            if memory_type == SEMANTIC:
                fields["name"] = original.name
            else:
                fields.update(actor=original.actor, occurred_at=original.occurred_at)
            copies.append((memory_type, fields, list(original.source_message_ids)))
            kind_of.append(kind)
        copies_stored = store(copies)
        truth_by_kind = {kind: set() for kind in kinds}
        for original, copy, kind in zip(chosen, copies_stored, kind_of):
            truth_by_kind[kind].add(frozenset((str(original.pk), str(copy.pk))))
        truth = set().union(*truth_by_kind.values())
        injected = {str(copy.pk) for copy in copies_stored}
        recall_with_duplicates = measure()
        log(f"injected {len(copies_stored)} copies; recall@10 {recall_with_duplicates}")

        end_user = EndUser.objects.get(organization=organization, user_id=user_id)
        sweep = []
        for min_cosine, min_text in itertools.product(SWEEP_COSINE, SWEEP_TEXT):
            with override_settings(CONSOLIDATE_MIN_COSINE=min_cosine, CONSOLIDATE_MIN_TEXT_SIMILARITY=min_text):
                planned = memories_consolidate(
                    organization=organization, scope="bench", end_user=end_user, dry_run=True
                )
            sweep.append(
                {"min_cosine": min_cosine, "min_text": min_text, **_score(_pairs(planned["merges"]), truth, injected)}
            )

        report = memories_consolidate(organization=organization, scope="bench", end_user=end_user)
        predicted = _pairs(report["merges"])
        by_kind = {
            kind: round(len(predicted & pairs) / len(pairs), 4) if pairs else None
            for kind, pairs in truth_by_kind.items()
        }
        recall_after = measure()
        memory_text = {
            str(pk): text
            for model in (SemanticMemory, EpisodicMemory)
            for pk, text in model.objects.filter(organization=organization).values_list("pk", "summary")
        }
        between_originals = [
            sorted(memory_text[pk] for pk in pair)
            for pair in sorted(predicted - truth, key=sorted)
            if not pair & injected
        ]
        missed = [sorted(memory_text[pk] for pk in pair) for pair in sorted(truth - predicted, key=sorted)]
        results = {
            "file": str(path),
            "sample": user_id,
            "seed": seed,
            "share": share,
            "embedding_provider": settings.EMBEDDING_PROVIDER,
            "embedding_model": settings.EMBEDDING_MODEL if settings.EMBEDDING_PROVIDER != "hash" else "hash",
            "turns": len(texts),
            "questions": len(questions),
            "memories": len(originals_stored),
            "injected": {kind: len(pairs) for kind, pairs in truth_by_kind.items()},
            "thresholds": {
                "min_cosine": settings.CONSOLIDATE_MIN_COSINE,
                "min_text": settings.CONSOLIDATE_MIN_TEXT_SIMILARITY,
            },
            "merge": _score(predicted, truth, injected),
            "merge_recall_by_kind": by_kind,
            "flagged": report["flagged"],
            "consolidation_seconds": report["seconds"],
            "recall_at_10": {
                "clean": recall_clean,
                "with_duplicates": recall_with_duplicates,
                "after_consolidation": recall_after,
            },
            "sweep": sweep,
            "merged_between_originals_sample": between_originals[:10],
            "missed_sample": missed[:10],
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        Organization.objects.filter(pk=organization.pk).delete()
    write_result(output_dir, "consolidate", results)
    log(json.dumps({key: results[key] for key in ("merge", "merge_recall_by_kind", "recall_at_10", "flagged")}))
    return results
