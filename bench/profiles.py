"""Compiled memory on LOCOMO: does searching profile pages beside the turns find more evidence?

Each dev conversation is ingested as in bench/locomo.py (raw turns, dated sessions, named
speakers), embedded, then projected and compiled through the pipeline's own handlers
(offline rules). Every question of categories 1-4 is searched twice among that user's items,
hybrid, top 10: `message` alone, and `message` + `profile`, where a profile hit counts every turn
it cites (so the second also reports how many turns its top 10 return). Compile cost is seconds
per 1,000 turns offline; with an LLM the prompt volume per 1,000 turns is measured against the
fake OpenAI server of the test suite (tokens estimated as characters / 4: the fake counts nothing).
"""

import json
import statistics
import time
import uuid
from collections import defaultdict
from pathlib import Path

from bench.data import data_file
from bench.locomo import CATEGORIES, ingest, normalise_evidence, recall, run_pending_tasks

K = 10
VARIANTS = ("message", "message+profile")


def _ranking(hits, dia_by_message: dict) -> list[str]:
    """dia_ids in rank order: a turn gives its own, a profile page those of the turns it cites."""
    ranking = []
    for hit in hits:
        if hit.source.memory_type == "message":
            dia_ids = [hit.instance.metadata.get("dia_id")]
        else:
            dia_ids = [
                dia_by_message.get(ref["item_id"]) for ref in hit.instance.source_refs if ref["item_type"] == "message"
            ]
        for dia_id in dia_ids:
            if dia_id and dia_id not in ranking:
                ranking.append(dia_id)
    return ranking


def _compile_with_fake_llm(organization) -> dict:
    """Recompiles every page of the organisation with an LLM (the suite's fake server), counting prompts."""
    from django.test import override_settings

    from apps.profiles.models import Entity
    from apps.profiles.services.compile import profile_compile
    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    try:
        entities = list(Entity.objects.filter(organization=organization).select_related("organization"))
        for _ in entities:
            server.add_json({"markdown": "# Page\n- A line [1]", "used": [1]})
        with override_settings(LLM_PROVIDER="openai", OPENAI_API_KEY="bench", OPENAI_BASE_URL=server.base_url):
            started = time.perf_counter()
            for entity in entities:
                profile_compile(entity=entity, reason="bench: LLM compile")
            seconds = time.perf_counter() - started
        characters = sum(len(message["content"]) for body in server.chat_requests() for message in body["messages"])
        return {"calls": len(server.chat_requests()), "prompt_characters": characters, "seconds": seconds}
    finally:
        server.stop()


def run(output_dir: Path, *, log=print) -> dict:
    from django.conf import settings

    from apps.conversations.models import Message
    from apps.profiles.models import Entity, Profile
    from apps.providers.embeddings import embedding_model_name
    from apps.search.engine import search
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    samples = json.loads(data_file("locomo-dev.json").read_text())
    organization = organization_create(name=f"bench-profiles-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    recalls = {variant: defaultdict(list) for variant in VARIANTS}
    returned_turns = defaultdict(list)
    turns = questions = 0
    compile_seconds = 0.0
    llm = {"calls": 0, "prompt_characters": 0, "seconds": 0.0}
    try:
        with override_rules():
            for sample in samples:
                texts = ingest(client, sample)
                turns += len(texts)
                run_pending_tasks(organization, task_types=["embed_messages"])
                started = time.perf_counter()
                run_pending_tasks(organization, task_types=["project_entities"])
                run_pending_tasks(organization, task_types=["compile_profile"])
                compile_seconds += time.perf_counter() - started
                dia_by_message = {
                    str(pk): metadata.get("dia_id")
                    for pk, metadata in Message.objects.filter(
                        organization=organization, end_user__user_id=sample["sample_id"]
                    ).values_list("pk", "metadata")
                }
                for qa in sample["qa"]:
                    evidence = normalise_evidence(qa.get("evidence") or [], set(texts))
                    if qa.get("category") not in CATEGORIES or not evidence:
                        continue
                    questions += 1
                    for variant in VARIANTS:
                        hits = search(
                            reader=client.reader,
                            query=str(qa["question"]),
                            memory_types=variant.split("+"),
                            method="hybrid",
                            limit=K,
                            filters={"user_id": sample["sample_id"]},
                        )
                        ranking = _ranking(hits, dia_by_message)
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
    output = Path(output_dir) / "profiles.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2))
    log(f"written to {output}")
    return results


def override_rules():
    from django.test import override_settings

    return override_settings(LLM_PROVIDER="rules")


def _pages_citing(subject) -> set:
    """Active pages of other owners that quote one of the subject's items (before it is erased)."""
    from apps.profiles.models import Profile

    pages = Profile.objects.filter(status=Profile.Status.ACTIVE, pk__in=subject.profile_sources().values("profile_id"))
    if subject.end_user is not None:
        pages = pages.exclude(end_user=subject.end_user)
    return set(pages.values_list("pk", flat=True))


def _erase(organization, requester, kind: str, subject_id: str) -> tuple[set, float]:
    """Erases a subject through the pipeline; returns the pages that had cited it and the seconds taken."""
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve

    subject = subject_resolve(organization=organization, kind=kind, subject_id=subject_id)
    citing = _pages_citing(subject)
    started = time.perf_counter()
    erasure_request(subject=subject, requested_by=requester)
    run_pending_tasks(organization, task_types=["erase_subject"])
    return citing, time.perf_counter() - started


def _beat_cycle(organization) -> float:
    """One beat cycle: the hourly lint job (organisation-wide, as beat queues it), then every task
    queued by it or by the erasure (the compiles' debounce is over, as a worker would see it)."""
    from apps.pipeline.services import task_execute
    from apps.profiles.tasks import enqueue_lint

    started = time.perf_counter()
    task_execute(task_id=enqueue_lint(), worker="bench")
    run_pending_tasks(organization)
    return time.perf_counter() - started


def _lint_state(organization, pages: set) -> dict:
    from apps.profiles.models import LintFinding, Profile
    from apps.profiles.services.lint import _pages_with_missing_sources

    profiles = Profile.objects.filter(pk__in=pages)
    return {
        "open_stale_findings": LintFinding.objects.filter(
            profile__in=pages, kind=LintFinding.Kind.STALE, status=LintFinding.Status.OPEN
        ).count(),
        "recompiled": profiles.filter(status=Profile.Status.ACTIVE).exclude(markdown="").count(),
        "archived": profiles.filter(status=Profile.Status.ARCHIVED).count(),
        "active_pages_citing_missing_items": len(_pages_with_missing_sources(organization.pk)),
    }


def run_lint(output_dir: Path, *, log=print) -> dict:
    """Lint after erasure, on one LOCOMO conversation kept by two end users (each side of the chat
    has its own agent, so both users' memories hold pages of the same two people):

    1. user erasure: erase `side-b`. Pages belong to one user and quote only that user's items, so
       the pages of `side-a` that cited `side-b`'s items must number 0, and get 0 stale findings;
    2. client erasure: `side-a`'s sessions were written alternately by two writer clients; erasing
       one clears every page that quoted it with a `stale` finding; one beat cycle later each of
       them is recompiled from what remains or archived.
    """
    from apps.profiles.models import LintFinding, Profile
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    sample = json.loads(data_file("locomo-dev.json").read_text())[0]
    organization = organization_create(name=f"bench-lint-{uuid.uuid4().hex[:8]}")
    admin, _ = client_create(organization=organization, name="eraser", write_scope="bench", can_erase=True)
    first, _ = client_create(organization=organization, name="writer-1", write_scope="bench")
    second, _ = client_create(organization=organization, name="writer-2", write_scope="bench")
    results: dict = {"conversation": sample["sample_id"]}
    try:
        with override_rules():
            turns = len(ingest(None, sample, user_id="side-a", writers=(first, second)))
            ingest(first, sample, user_id="side-b")
            run_pending_tasks(organization)
            results["turns_per_user"] = turns
            results["pages_before"] = Profile.objects.filter(organization=organization, status="active").count()
            unchanged = dict(Profile.objects.filter(end_user__user_id="side-a").values_list("pk", "revision"))

            citing, seconds = _erase(organization, admin, "user", "side-b")
            stale = LintFinding.objects.filter(profile__organization=organization, kind=LintFinding.Kind.STALE).count()
            cycle = _beat_cycle(organization)
            results["user_erasure"] = {
                "pages_of_other_users_citing_the_user": len(citing),
                "stale_findings": stale,
                "pages_left": Profile.objects.filter(organization=organization).count(),
                "side_a_pages_unchanged": unchanged
                == dict(Profile.objects.filter(end_user__user_id="side-a").values_list("pk", "revision")),
                "erasure_seconds": round(seconds, 2),
                "beat_cycle_seconds": round(cycle, 2),
                **_lint_state(organization, citing),
            }

            citing, seconds = _erase(organization, admin, "client", str(second.pk))
            stale = LintFinding.objects.filter(
                profile__in=citing, kind=LintFinding.Kind.STALE, status=LintFinding.Status.OPEN
            ).count()
            cycle = _beat_cycle(organization)
            results["client_erasure"] = {
                "pages_citing_the_client": len(citing),
                "stale_findings": stale,
                "erasure_seconds": round(seconds, 2),
                "beat_cycle_seconds": round(cycle, 2),
                **_lint_state(organization, citing),
            }
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    for step in ("user_erasure", "client_erasure"):
        log(f"{step}: {results[step]}")
    output = Path(output_dir) / "profiles_lint.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2))
    log(f"written to {output}")
    return results
