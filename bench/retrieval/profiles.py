"""Compiled memory on LOCOMO: does searching profile pages beside the turns find more evidence?

Each dev conversation is ingested as in bench/retrieval/locomo.py (raw turns, dated sessions, named
speakers), embedded, then projected and compiled through the pipeline's own handlers
(offline rules). Every question of categories 1-4 is searched twice among that user's items,
hybrid, top 10: `message` alone, and `message` + `profile`, where a profile hit counts every turn
it cites (so the second also reports how many turns its top 10 return). Compile cost is seconds
per 1,000 turns offline; with an LLM the prompt volume per 1,000 turns is measured against the
fake OpenAI server of the test suite (tokens estimated as characters / 4: the fake counts nothing).
"""

import statistics
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import Stopwatch, run_pending_tasks, write_result
from bench.data import CATEGORIES, ingest, load, scored_questions
from bench.retrieval.locomo import cited_ranking, recall, sample_search

K = 10
VARIANTS = ("message", "message+profile")


def _compile_with_fake_llm(organization) -> dict:
    """Recompiles every page of the organisation with an LLM (the suite's fake server), counting prompts."""
    from django.test import override_settings

    from apps.profiles.models import Entity
    from apps.profiles.services.compile import profile_compile
    from harness.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    try:
        entities = list(Entity.objects.filter(organization=organization).select_related("organization"))
        for _ in entities:
            server.add_json({"markdown": "# Page\n- A line [1]", "used": [1]})
        with override_settings(LLM_PROVIDER="openai", OPENAI_API_KEY="bench", OPENAI_BASE_URL=server.base_url):
            with Stopwatch() as watch:
                for entity in entities:
                    profile_compile(entity=entity, reason="bench: LLM compile")
        characters = sum(len(message["content"]) for body in server.chat_requests() for message in body["messages"])
        return {"calls": len(server.chat_requests()), "prompt_characters": characters, "seconds": watch.seconds}
    finally:
        server.stop()


def run(output_dir: Path, *, log=print) -> dict:
    from django.conf import settings
    from django.test import override_settings

    from apps.conversations.models import Message
    from apps.profiles.models import Entity, Profile
    from apps.providers.embeddings import embedding_model_name
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    samples = load("locomo-dev.json")
    organization = organization_create(name=f"bench-profiles-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    recalls = {variant: defaultdict(list) for variant in VARIANTS}
    returned_turns = defaultdict(list)
    turns = questions = 0
    compile_seconds = 0.0
    llm = {"calls": 0, "prompt_characters": 0, "seconds": 0.0}
    try:
        with override_settings(LLM_PROVIDER="rules"):
            for sample in samples:
                texts = ingest(client, sample)
                turns += len(texts)
                run_pending_tasks(organization, task_types=["embed_messages"])
                with Stopwatch() as watch:
                    run_pending_tasks(organization, task_types=["project_entities"])
                    run_pending_tasks(organization, task_types=["compile_profile"])
                compile_seconds += watch.seconds
                dia_by_message = {
                    str(pk): metadata.get("dia_id")
                    for pk, metadata in Message.objects.filter(
                        organization=organization, end_user__user_id=sample["sample_id"]
                    ).values_list("pk", "metadata")
                }
                for qa, evidence in scored_questions(sample, set(texts)):
                    questions += 1
                    for variant in VARIANTS:
                        hits = sample_search(client, sample, qa["question"], memory_types=variant.split("+"), limit=K)
                        ranking = cited_ranking(hits, dia_by_message)
                        recalls[variant][qa["category"]].append(recall(ranking, evidence, len(ranking) or K))
                        if variant == "message+profile":
                            returned_turns[qa["category"]].append(len(ranking))
                log(f"{sample['sample_id']}: {len(texts)} turns, {questions} questions so far")
        pages = Profile.objects.filter(organization=organization, status="active").count()
        entities = Entity.objects.filter(organization=organization).count()
        llm = _compile_with_fake_llm(organization)
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    results = {
        "questions": questions,
        "turns": turns,
        "entities": entities,
        "profiles": pages,
        "embedding_model": embedding_model_name(),
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "compile_seconds_per_1000_turns_offline": round(compile_seconds * 1000 / turns, 2),
        "llm_calls_per_1000_turns": round(llm["calls"] * 1000 / turns, 1),
        "llm_prompt_tokens_per_1000_turns_estimated": round(llm["prompt_characters"] / 4 * 1000 / turns),
        f"recall@{K}": {
            variant: {
                "overall": round(statistics.mean(v for values in by_category.values() for v in values), 4),
                **{str(category): round(statistics.mean(by_category[category]), 4) for category in CATEGORIES},
            }
            for variant, by_category in recalls.items()
        },
        "turns_returned_by_message+profile": {
            str(category): round(statistics.mean(values), 1) for category, values in sorted(returned_turns.items())
        },
    }
    log(f"\nLOCOMO recall@{K}, hybrid, {questions} questions ({results['embedding_model']}), by category 1-4:")
    for variant in VARIANTS:
        row = results[f"recall@{K}"][variant]
        log(
            f"  {variant:<17} overall {row['overall']:.3f}  " + "  ".join(f"c{c} {row[str(c)]:.3f}" for c in CATEGORIES)
        )
    log(f"  turns returned by message+profile: {results['turns_returned_by_message+profile']}")
    log(
        f"{entities} entities, {pages} pages; compile {results['compile_seconds_per_1000_turns_offline']} s per 1,000 turns "
        f"offline; with an LLM {results['llm_calls_per_1000_turns']} calls and ~{results['llm_prompt_tokens_per_1000_turns_estimated']} "
        "prompt tokens per 1,000 turns"
    )
    log(f"written to {write_result(output_dir, 'profiles', results)}")
    return results
