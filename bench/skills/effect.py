"""Skill effectiveness against known truth: do outcomes flag the skills that hurt, lift the ones that
help, and leave the neutral ones alone?

Each seed builds one scope with skills whose effect is known: HELPFUL skills raise a task
session's success probability from P_BASE to P_HELPFUL, HARMFUL ones lower it to P_HARMFUL, NEUTRAL
ones leave it. Each helpful skill has a neutral twin with the same description and instructions
(equally relevant to the twins' shared task; only their trigger words differ). Sessions run in
rounds: in each, every skill serves one task session of its own user, found by its trigger word
(`skills/retrieve` with the session id, k=1), and BASELINE_PER_ROUND sessions use no skill; each
session is added and sealed through `memory/add` with an outcome drawn from its probability, then
the review step the distill handler runs after a sealed task session runs
(`skills_review_effectiveness`). The operations are the ones the REST views call.

At 10, 20, 50 and 100 uses per skill it reports the share of harmful skills sent to review, of
neutral skills wrongly sent (both: at any point up to then, as the review runs after every
session), and of helpful skills ranked above their neutral twin for the twins' shared task.
Beside it, STAT_SEEDS replays of the same decision rule (apps.skills.effectiveness: the same
Evidence.harmful and ranking factor) on drawn counts alone give the same shares with tighter
confidence. `python -m bench skill_effect`.
"""

import json
import os
import random
import string
import time
import uuid

from bench.common import write_result

SCOPE = "bench-effect"
CHECKPOINTS = (10, 20, 50, 100)
P_BASE, P_HELPFUL, P_HARMFUL = 0.5, 0.75, 0.3
HELPFUL, HARMFUL, NEUTRAL_OTHERS = 2, 2, 2
BASELINE_PER_ROUND = 2
API_SEEDS = int(os.environ.get("BENCH_SKILL_EFFECT_SEEDS", "4"))
STAT_SEEDS = int(os.environ.get("BENCH_SKILL_EFFECT_STAT_SEEDS", "2000"))
TURNS = [{"role": "user", "content": "Please take care of my request."}, {"role": "assistant", "content": "Done."}]
TARGETS = {"harmful_flagged_at_50": 0.9, "neutral_flagged_at_50": 0.05}


def _word(rng) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(9))


def _plan(rng) -> list[dict]:
    """The skills of one seed: (kind, probability, trigger word, twin group)."""
    skills = []
    for group in range(HELPFUL):
        skills.append({"kind": "helpful", "p": P_HELPFUL, "word": _word(rng), "twin": group})
        skills.append({"kind": "neutral", "p": P_BASE, "word": _word(rng), "twin": group})
    skills += [{"kind": "harmful", "p": P_HARMFUL, "word": _word(rng), "twin": None} for _ in range(HARMFUL)]
    skills += [{"kind": "neutral", "p": P_BASE, "word": _word(rng), "twin": None} for _ in range(NEUTRAL_OTHERS)]
    return skills


def _api_seed(seed: int) -> dict:
    """One seed through the operations; returns per checkpoint the counts of flagged and ranked skills."""
    from django.core.cache import cache

    from apps.conversations.models import Session
    from apps.conversations.operations import add_memory
    from apps.skills.models import Skill
    from apps.skills.operations import retrieve_skills
    from apps.skills.services.review import skills_review_effectiveness
    from apps.skills.services.skills import skill_create
    from apps.tenancy.services import client_create, organization_create

    rng = random.Random(seed)
    organization = organization_create(name=f"bench-effect-{seed}-{uuid.uuid4().hex[:6]}")
    client, _ = client_create(organization=organization, name="agent", write_scope=SCOPE, read_scopes=[SCOPE])
    plan = _plan(rng)
    twin_texts = {group: f"Handle the {_word(rng)} {_word(rng)} request" for group in range(HELPFUL)}
    for number, item in enumerate(plan):
        text = twin_texts[item["twin"]] if item["twin"] is not None else f"Handle the {_word(rng)} request"
        item["skill"] = skill_create(
            organization=organization,
            scope=SCOPE,
            fields={
                "name": f"{item['kind']}-{number}",
                "description": text,
                "instructions": f"{text} step by step.",
                "triggers": [item["word"]],
            },
            actor="bench",
            reason="bench",
            status=Skill.Status.ACTIVE,
        )
    results = {}
    sessions = 0
    for round_number in range(1, max(CHECKPOINTS) + 1):
        work = [(item, item["p"]) for item in plan] + [(None, P_BASE)] * BASELINE_PER_ROUND
        rng.shuffle(work)
        for item, probability in work:
            sessions += 1
            user_id, session_id = f"user-{sessions}", f"task-{sessions}"
            if item is not None:
                retrieve_skills(
                    client=client,
                    data={"task": item["word"], "k": 1, "user_id": user_id, "session_id": session_id},
                )
            outcome = "success" if rng.random() < probability else "failure"
            add_memory(
                client=client,
                data={
                    "user_id": user_id,
                    "session_id": session_id,
                    "messages": TURNS,
                    "session_tag": "task",
                    "seal": True,
                    "outcome": outcome,
                },
            )
            session = Session.objects.get(organization=organization, session_id=session_id, end_user__user_id=user_id)
            skills_review_effectiveness(session=session)
        if round_number in CHECKPOINTS:
            cache.clear()  # the ranking's evidence is cached for seconds; read it as it is now
            statuses = dict(Skill.objects.filter(organization=organization).values_list("pk", "status"))
            counts = {"harmful_flagged": 0, "neutral_flagged": 0, "helpful_above_twin": 0}
            for item in plan:
                if item["kind"] != "helpful":
                    counts[f"{item['kind']}_flagged"] += statuses[item["skill"].pk] == Skill.Status.PENDING_REVIEW
            for group, text in twin_texts.items():
                helpful = next(item for item in plan if item["twin"] == group and item["kind"] == "helpful")
                hits = retrieve_skills(client=client, data={"task": text, "k": 2})["skills"]
                counts["helpful_above_twin"] += bool(hits) and hits[0]["id"] == str(helpful["skill"].pk)
            results[round_number] = counts
    return results


def _stat_seed(rng, weight: float, prior: float) -> dict:
    """The same rule on drawn outcomes alone: {checkpoint: counts}, sequential review as above."""
    from apps.skills.effectiveness import Evidence, effectiveness_factor

    plan = [("helpful", P_HELPFUL)] * HELPFUL + [("neutral", P_BASE)] * (HELPFUL + NEUTRAL_OTHERS)
    plan += [("harmful", P_HARMFUL)] * HARMFUL
    successes = [0] * len(plan)
    flagged = [False] * len(plan)
    base_sessions = base_successes = 0
    results = {}
    for round_number in range(1, max(CHECKPOINTS) + 1):
        outcomes = [rng.random() < p for _, p in plan]
        baseline = [rng.random() < P_BASE for _ in range(BASELINE_PER_ROUND)]
        for index, won in enumerate(outcomes):
            successes[index] += won
        base_sessions += BASELINE_PER_ROUND
        base_successes += sum(baseline)
        total_sessions = base_sessions + round_number * len(plan)
        total_successes = base_successes + sum(successes)
        for index in range(len(plan)):
            # Every session is its own user's (as in the API run): one outcome per user.
            evidence = Evidence(
                sessions=round_number,
                users=round_number,
                successes=successes[index],
                failures=round_number - successes[index],
                baseline_users=total_sessions - round_number,
                baseline_successes=total_successes - successes[index],
            )
            flagged[index] = flagged[index] or evidence.harmful()
        if round_number in CHECKPOINTS:
            rate = total_successes / total_sessions
            factors = [
                effectiveness_factor(
                    successes=successes[index], sessions=round_number, scope_rate=rate, weight=weight, prior=prior
                )[0]
                for index in range(len(plan))
            ]
            counts = {"harmful_flagged": 0, "neutral_flagged": 0, "helpful_above_twin": 0}
            for index, (kind, _) in enumerate(plan):
                if kind != "helpful":
                    counts[f"{kind}_flagged"] += flagged[index]
            for group in range(HELPFUL):  # helpful `group`'s twin is neutral `group` (equal relevance)
                counts["helpful_above_twin"] += factors[group] > factors[HELPFUL + group]
            results[round_number] = counts
    return results


def _shares(per_seed: list[dict], seeds: int) -> dict:
    totals = {"harmful_flagged": HARMFUL, "neutral_flagged": HELPFUL + NEUTRAL_OTHERS, "helpful_above_twin": HELPFUL}
    shares = {}
    for checkpoint in CHECKPOINTS:
        shares[str(checkpoint)] = {
            name: round(sum(result[checkpoint][name] for result in per_seed) / (total * seeds), 4)
            for name, total in totals.items()
        }
    return shares


def run(output_dir) -> dict:
    from django.conf import settings
    from django.test.utils import override_settings

    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.effectiveness import REVIEW_HORIZON, REVIEW_Z
    from apps.tenancy.models import Organization

    started = time.perf_counter()
    # Hash embeddings: each skill is found by its own trigger word; semantic quality is not measured here.
    with override_settings(EMBEDDING_PROVIDER="hash", LLM_PROVIDER="rules"):
        api_results = []
        for seed in range(API_SEEDS):
            api_results.append(_api_seed(seed))
            print(f"skill_effect: API seed {seed + 1}/{API_SEEDS} done after {time.perf_counter() - started:.0f} s")
        # The sealed sessions queued distillation, which this benchmark does not measure.
        benched = Organization.objects.filter(name__startswith="bench-effect-")
        tasks_cancel(queryset=MemoryTask.objects.filter(organization__in=benched))
    api_seconds = time.perf_counter() - started
    rng = random.Random(12345)
    stat_results = [
        _stat_seed(rng, settings.SKILL_EFFECTIVENESS_WEIGHT, settings.SKILL_EFFECTIVENESS_PRIOR_SESSIONS)
        for _ in range(STAT_SEEDS)
    ]
    api_shares = _shares(api_results, API_SEEDS)
    stat_shares = _shares(stat_results, STAT_SEEDS)
    result = {
        "benchmark": "skill_effect",
        "truth": {"p_base": P_BASE, "p_helpful": P_HELPFUL, "p_harmful": P_HARMFUL},
        "per_seed": {
            "helpful": HELPFUL,
            "harmful": HARMFUL,
            "neutral": HELPFUL + NEUTRAL_OTHERS,
            "baseline_sessions_per_round": BASELINE_PER_ROUND,
        },
        "settings": {
            "REVIEW_Z": REVIEW_Z,
            "REVIEW_HORIZON": REVIEW_HORIZON,
            "SKILL_REVIEW_MIN_USERS": settings.SKILL_REVIEW_MIN_USERS,
            "SKILL_SHARE_MIN_USERS": settings.SKILL_SHARE_MIN_USERS,
            "SKILL_EVIDENCE_TOP_RANKS": settings.SKILL_EVIDENCE_TOP_RANKS,
            "SKILL_EFFECTIVENESS_WEIGHT": settings.SKILL_EFFECTIVENESS_WEIGHT,
            "SKILL_EFFECTIVENESS_PRIOR_SESSIONS": settings.SKILL_EFFECTIVENESS_PRIOR_SESSIONS,
        },
        "api": {"seeds": API_SEEDS, "seconds": round(api_seconds, 1), "by_uses": api_shares},
        "statistics_only": {"seeds": STAT_SEEDS, "by_uses": stat_shares},
        "targets": TARGETS,
        "meets_targets": {
            "harmful_flagged_at_50": stat_shares["50"]["harmful_flagged"] >= TARGETS["harmful_flagged_at_50"],
            "neutral_flagged_at_50": stat_shares["50"]["neutral_flagged"] <= TARGETS["neutral_flagged_at_50"],
        },
    }
    write_result(output_dir, "skill_effect", result)
    print(json.dumps({"api": api_shares, "statistics_only": stat_shares}, indent=2))
    return result
