"""tau-bench task path: import 100 real airline trajectories as task sessions, distil and evolve them
with the rule-based learner, then retrieve the top-5 skills for each trajectory's first user turn.

Reports experiences and skills created, sessions per second through distill+evolve, and the
share of requests whose top-5 holds a skill whose action signature covers the task's gold
action names (`info.task.actions`), retrieved as the trajectory's user (shared skills and that
user's own) and, beside it, naming no user (shared skills only). `python -m bench skills`.
"""

import uuid
from collections import Counter

from bench.common import Stopwatch, percentiles, write_result
from bench.data import load, task_session_ingest

SCOPE = "bench-airline"
TOP_K = 5


def _first_user_turn(trajectory: dict) -> str:
    return next((m.get("content") or "" for m in trajectory["traj"] if m["role"] == "user"), "")


def _import(client, trajectories) -> tuple[list, int]:
    """Through the same ingest service as the API, sealed, as task sessions with outcome from reward."""
    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.conversations.models import Session

    messages = 0
    for item in trajectory_sessions(trajectories):
        messages += task_session_ingest(client, item).messages_stored
    sessions = list(
        Session.objects.filter(organization=client.organization).select_related("organization").order_by("session_id")
    )
    return sessions, messages


def _coverage(ranked_lists, golds) -> dict:
    """Share of requests with gold actions whose top-1 / top-k skill covers them."""
    top1 = topk = counted = 0
    for ranked, gold in zip(ranked_lists, golds):
        if not gold:
            continue
        counted += 1
        covers = [gold <= set(retrieved.skill.action_signature) for retrieved in ranked]
        top1 += bool(covers[:1] and covers[0])
        topk += any(covers)
    return {"requests": counted, "top1": round(top1 / counted, 4), f"top{TOP_K}": round(topk / counted, 4)}


def _effectiveness_replay(trajectories) -> dict:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    """Trials 0-2 build the skills; each trial-3 session retrieves with its session id (as its user)
    and is sealed with its real reward. Reports the per-skill figures this evidence gives and the
    gold-action coverage of trial 3's requests before it (relevance alone) and after it, with the
    effectiveness factor and, beside it at the same moment, with the factor off."""
    from django.conf import settings
    from django.core.cache import cache
    from django.test.utils import override_settings

    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.pipeline.locks import advisory_lock
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.effectiveness import ranking_adjustments, skill_evidence
    from apps.skills.models import Skill
    from apps.skills.services.distill import DISTILL_LOCKS, session_distill
    from apps.skills.services.evolve.run import evolve_key, skills_evolve
    from apps.skills.services.retrieve import skills_rank, skills_retrieve
    from apps.tenancy.services import client_create, organization_create

    organization = organization_create(name=f"bench-skills-replay-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto"):
            client, _ = client_create(organization=organization, name="bench", write_scope=SCOPE, read_scopes=[SCOPE])
            learning = [t for t in trajectories if t.get("trial", 0) < 3]
            replay = [t for t in trajectories if t.get("trial", 0) == 3]
            sessions, _ = _import(client, learning)
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))
            for session in sessions:
                with advisory_lock(DISTILL_LOCKS.key_of(session)):
                    session_distill(session=session)
            while True:
                with advisory_lock(evolve_key(organization=organization, scope=SCOPE)):
                    result = skills_evolve(organization=organization, scope=SCOPE)
                if not result["remaining"] or not (result["consumed"] or result["superseded"]):
                    break
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))

            items = trajectory_sessions(replay)
            golds = [{action["name"] for action in t["info"]["task"]["actions"]} for t in replay]
            before = []
            for item, trajectory in zip(items, replay):
                before.append(
                    skills_retrieve(
                        client=client,
                        task=_first_user_turn(trajectory),
                        k=TOP_K,
                        user_id=item["user_id"],
                        session_id=item["session_id"],
                    )
                )
                task_session_ingest(client, item)
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))
            cache.clear()

            def ranked(weight):
                with override_settings(SKILL_EFFECTIVENESS_WEIGHT=weight):
                    cache.clear()
                    return [
                        skills_rank(reader=client.reader, task=_first_user_turn(t), k=TOP_K, user_id=item["user_id"])
                        for item, t in zip(items, replay)
                    ]

            after = ranked(settings.SKILL_EFFECTIVENESS_WEIGHT)
            relevance_only = ranked(0)
            used = list(Skill.objects.filter(organization=organization, uses__isnull=False).distinct())
            cache.clear()
            factors = ranking_adjustments(used)
            per_skill = []
            for skill in used:
                evidence, _ = skill_evidence(skill)
                figures = evidence.as_dict()
                per_skill.append(
                    {
                        "skill": skill.name,
                        **{name: figures[name] for name in ("uses", "sessions", "users", "successes", "failures")},
                        **{name: figures[name] for name in ("success_rate", "lift", "lift_interval")},
                        "factor": factors[skill.pk].factor,
                        "status": skill.status,
                    }
                )
            per_skill.sort(key=lambda row: -row["uses"])
            return {
                "learned_from_trials": [0, 1, 2],
                "replayed_trial": 3,
                "replayed_sessions": len(items),
                "replayed_successes": sum(1 for item in items if item["outcome"] == "success"),
                "weight": settings.SKILL_EFFECTIVENESS_WEIGHT,
                "coverage_before_outcomes": _coverage(before, golds),
                "coverage_after_outcomes_with_factor": _coverage(after, golds),
                "coverage_after_outcomes_relevance_only": _coverage(relevance_only, golds),
                "per_skill": per_skill,
            }
    finally:
        organization.delete()


def run(output_dir) -> dict:  # noqa: PLR0915 (a benchmark run: one procedure, read top to bottom)
    from django.conf import settings
    from django.test.utils import override_settings

    from apps.pipeline.locks import advisory_lock
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.models import Skill, SkillExperience
    from apps.skills.services.distill import DISTILL_LOCKS, session_distill
    from apps.skills.services.evolve.run import evolve_key, skills_evolve
    from apps.skills.services.retrieve import skills_rank
    from apps.tenancy.services import client_create, organization_create

    trajectories = load("tau-airline-dev.json")
    organization = organization_create(name=f"bench-skills-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto"):
            client, _ = client_create(organization=organization, name="bench", write_scope=SCOPE, read_scopes=[SCOPE])
            with Stopwatch() as importing:
                sessions, messages = _import(client, trajectories)
            # The benchmark runs the learners itself; a worker must not race it for the queued rows.
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))

            with Stopwatch() as distilling:
                for session in sessions:
                    with advisory_lock(DISTILL_LOCKS.key_of(session)):
                        session_distill(session=session)
            runs = 0
            with Stopwatch() as evolving:
                while True:
                    with advisory_lock(evolve_key(organization=organization, scope=SCOPE)):
                        result = skills_evolve(organization=organization, scope=SCOPE)
                    runs += 1
                    if not result["remaining"] or not (result["consumed"] or result["superseded"]):
                        break
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))

            skills = {skill.pk: skill for skill in Skill.objects.filter(organization=organization, status="active")}
            latencies, covered, covered_shared, with_gold, reachable = [], 0, 0, 0, 0
            for trajectory in trajectories:
                gold = {action["name"] for action in trajectory["info"]["task"]["actions"]}
                # As an agent acting for the trajectory's user asks: the scope's shared skills and
                # those that user taught (apps.skills.trust).
                user_id = trajectory["info"]["task"].get("user_id") or "imported"
                with Stopwatch() as watch:
                    hits = skills_rank(
                        reader=client.reader, task=_first_user_turn(trajectory), k=TOP_K, user_id=user_id
                    )
                latencies.append(watch.ms)
                shared_hits = skills_rank(reader=client.reader, task=_first_user_turn(trajectory), k=TOP_K)
                if not gold:
                    continue
                with_gold += 1
                covered += any(gold <= set(skill.action_signature) for skill in (hit.skill for hit in hits))
                covered_shared += any(
                    gold <= set(skill.action_signature) for skill in (hit.skill for hit in shared_hits)
                )
                reachable += any(gold <= set(skill.action_signature) for skill in skills.values())

        experiences = Counter(
            SkillExperience.objects.filter(organization=organization).values_list("experience_type", flat=True)
        )
        skill_types = Counter(skill.entry_type for skill in skills.values())
        learn_seconds = distilling.seconds + evolving.seconds
        retrieval_ms = percentiles(latencies)
        results = {
            "dataset": "tau-airline-dev.json",
            "llm_provider": "rules",
            "embedding_provider": settings.EMBEDDING_PROVIDER,
            "sessions": len(sessions),
            "messages": messages,
            "successful_sessions": sum(1 for s in sessions if s.outcome == "success"),
            "experiences": sum(experiences.values()),
            "experiences_by_type": dict(experiences),
            "skills": len(skills),
            "skills_by_entry_type": dict(skill_types),
            "evolution_runs": runs,
            "import_seconds": round(importing.seconds, 3),
            "distill_seconds": round(distilling.seconds, 3),
            "evolve_seconds": round(evolving.seconds, 3),
            "sessions_per_second": round(len(sessions) / learn_seconds, 2) if learn_seconds else None,
            "requests": len(trajectories),
            "requests_with_gold_actions": with_gold,
            f"top{TOP_K}_covers_gold_actions": round(covered / with_gold, 4) if with_gold else None,
            f"top{TOP_K}_shared_only_covers_gold_actions": round(covered_shared / with_gold, 4) if with_gold else None,
            "shared_skills": sum(1 for skill in skills.values() if skill.shared),
            "share_min_users": settings.SKILL_SHARE_MIN_USERS,
            "any_skill_covers_gold_actions": round(reachable / with_gold, 4) if with_gold else None,
            "retrieval_p50_ms": retrieval_ms["p50"],
            "retrieval_p95_ms": retrieval_ms["p95"],
        }
    finally:
        organization.delete()

    results["effectiveness_replay"] = _effectiveness_replay(trajectories)
    write_result(output_dir, "skills", results)
    print(
        f"skills (tau-bench airline, rules): {results['sessions']} sessions -> {results['experiences']} experiences "
        f"-> {results['skills']} skills; {results['sessions_per_second']} sessions/s through distill+evolve; "
        f"top-{TOP_K} covers gold actions for {results[f'top{TOP_K}_covers_gold_actions']:.1%} of "
        f"{with_gold} requests (any skill: {results['any_skill_covers_gold_actions']:.1%})"
    )
    return results
