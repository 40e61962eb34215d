"""tau-bench task path, the issue-52 protocol: trials 0-2 of the dev tasks (0-24) imported as task
sessions, sealed with their outcome, distilled and evolved by the rule-based learner; then each task's
trial-3 first request is asked by a new customer, who is served the scope's shared skills only.

Reported per variant (each session its own customer, and each task's three sessions from one user):
over the attainable tasks (some live skill's action signature covers the task's gold action names,
`info.task.actions`), the share whose first covering skill is at rank 1 and within the top 5; beside
it the effectiveness replay (trial 3 retrieving with its session ids and sealed with its reward).
`python -m bench skills`.
"""

import uuid
from collections import Counter

from bench.common import Stopwatch, percentiles, write_result
from bench.data import load, task_session_ingest

SCOPE = "bench-airline"
TOP_K = 5


def _first_user_turn(trajectory: dict) -> str:
    return next((m.get("content") or "" for m in trajectory["traj"] if m["role"] == "user"), "")


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


def _effectiveness_replay(trajectories) -> dict:
    """Trials 0-2 build the skills; each trial-3 session retrieves with its session id (as its user)
    and is sealed with its real reward. Reports the per-skill figures this evidence gives and the
    gold-action coverage of trial 3's requests before it (relevance alone) and after it, with the
    effectiveness factor and, beside it at the same moment, with the factor off."""
    from django.conf import settings
    from django.core.cache import cache
    from django.test.utils import override_settings

    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.effectiveness import ranking_adjustments, skill_evidence
    from apps.skills.models import Skill
    from apps.skills.services.retrieve import skills_rank, skills_retrieve
    from apps.tenancy.services import client_create, organization_create

    organization = organization_create(name=f"bench-skills-replay-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto"):
            client, _ = client_create(organization=organization, name="bench", write_scope=SCOPE, read_scopes=[SCOPE])
            learning = [t for t in trajectories if t.get("trial", 0) < 3]
            replay = [t for t in trajectories if t.get("trial", 0) == 3]
            _learn(client, trajectory_sessions(learning))

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


VARIANTS = {
    # Every session a different customer: what a crowd of end users teaches.
    "distinct_customers": lambda trajectory: f"customer-{trajectory['task_id']}-{trajectory.get('trial', 0)}",
    # A task's three sessions from one user: one voice per task.
    "one_user_per_task": lambda trajectory: f"customer-{trajectory['task_id']}",
}
LEARNED_TRIALS = (0, 1, 2)
ASKED_TRIAL = 3


def _gold(trajectory) -> set:
    return {action["name"] for action in trajectory["info"]["task"]["actions"]}


def _learn(client, items) -> dict:
    """Ingested as the API does, then distilled and evolved in this process until nothing is left."""
    from apps.pipeline.locks import advisory_lock
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.services.distill import DISTILL_LOCKS, session_distill
    from apps.skills.services.evolve.run import evolve_key, skills_evolve

    sessions, _ = _import_items(client, items)
    # The benchmark runs the learners itself; a worker must not race it for the queued rows.
    tasks_cancel(queryset=MemoryTask.objects.filter(organization=client.organization))
    with Stopwatch() as distilling:
        for session in sessions:
            with advisory_lock(DISTILL_LOCKS.key_of(session)):
                session_distill(session=session)
    runs = 0
    with Stopwatch() as evolving:
        while True:
            with advisory_lock(evolve_key(organization=client.organization, scope=SCOPE)):
                result = skills_evolve(organization=client.organization, scope=SCOPE)
            runs += 1
            if not result["remaining"] or not (result["consumed"] or result["superseded"]):
                break
    tasks_cancel(queryset=MemoryTask.objects.filter(organization=client.organization))
    return {
        "sessions": len(sessions),
        "successful_sessions": sum(1 for session in sessions if session.outcome == "success"),
        "evolution_runs": runs,
        "distill_seconds": round(distilling.seconds, 3),
        "evolve_seconds": round(evolving.seconds, 3),
    }


def _import_items(client, items) -> tuple[list, int]:
    from apps.conversations.models import Session

    messages = sum(task_session_ingest(client, item).messages_stored for item in items)
    sessions = list(
        Session.objects.filter(organization=client.organization).select_related("organization").order_by("session_id")
    )
    return sessions, messages


def _protocol(trajectories, *, customer) -> dict:
    """One variant of the protocol in an organisation of its own."""
    from django.test.utils import override_settings

    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.skills.models import Skill, SkillExperience
    from apps.skills.services.review import skill_share_by_person
    from apps.tenancy.services import client_create, organization_create

    learning = [t for t in trajectories if t.get("trial", 0) in LEARNED_TRIALS]
    asked = sorted((t for t in trajectories if t.get("trial", 0) == ASKED_TRIAL), key=lambda t: t["task_id"])
    items = trajectory_sessions(learning)
    for item, trajectory in zip(items, learning):
        item["user_id"] = customer(trajectory)
    organization = organization_create(name=f"bench-skills-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto"):
            client, _ = client_create(organization=organization, name="bench", write_scope=SCOPE, read_scopes=[SCOPE])
            learned = _learn(client, items)
            live = list(Skill.objects.filter(organization=organization, status=Skill.Status.ACTIVE))
            rows, latencies = _asked(client, asked, live, customer="new-customer")
            # Where the crowd is thin a person decides: each skill the queue shows (`withheld=true`) shared
            # with one approval, then the same requests asked by other new customers.
            queue = list(
                Skill.objects.filter(organization=organization, shared=False, withheld__isnull=False).distinct()
            )
            for skill in queue:
                skill_share_by_person(skill=skill, actor="bench:reviewer")
            reviewed, _ = _asked(client, asked, live, customer="newer-customer")
            experiences = Counter(
                SkillExperience.objects.filter(organization=organization).values_list("experience_type", flat=True)
            )
    finally:
        organization.delete()
    retrieval_ms = percentiles(latencies)
    return {
        **learned,
        "experiences": sum(experiences.values()),
        "experiences_by_type": dict(experiences),
        "skills": len(live),
        "shared_skills": sum(1 for skill in live if skill.shared),
        **_coverage_of(rows),
        "retrieval_p50_ms": retrieval_ms["p50"],
        "retrieval_p95_ms": retrieval_ms["p95"],
        "after_one_review": {"skills_shared_by_a_person": len(queue), **_coverage_of(reviewed)},
        "per_task": rows,
    }


def _coverage_of(rows) -> dict:
    attainable = [row for row in rows if row["attainable"]]
    return {
        "tasks_with_gold_actions": len(rows),
        "attainable_tasks": len(attainable),
        "rank1": round(sum(row["rank"] == 1 for row in attainable) / len(attainable), 4) if attainable else None,
        f"top{TOP_K}": round(sum(row["rank"] is not None for row in attainable) / len(attainable), 4)
        if attainable
        else None,
    }


def _asked(client, asked, live, *, customer: str) -> tuple[list, list]:
    """Each task's trial-3 first request, asked (as an agent does, with a session id) by a customer of
    its own who taught nothing: per task the rank of the first skill covering its gold actions."""
    from apps.skills.services.retrieve import skills_retrieve

    rows, latencies = [], []
    for trajectory in asked:
        gold = _gold(trajectory)
        if not gold:
            continue
        with Stopwatch() as watch:
            ranked = skills_retrieve(
                client=client,
                task=_first_user_turn(trajectory),
                k=TOP_K,
                user_id=f"{customer}-{trajectory['task_id']}",
                session_id=f"asked-{trajectory['task_id']}",
            )
        latencies.append(watch.ms)
        rank = next((n for n, hit in enumerate(ranked, start=1) if gold <= set(hit.skill.action_signature)), None)
        rows.append(
            {
                "task": trajectory["task_id"],
                "attainable": any(gold <= set(skill.action_signature) for skill in live),
                "rank": rank,
                "served": [hit.skill.name for hit in ranked],
            }
        )
    return rows, latencies


def run(output_dir) -> dict:
    from django.conf import settings

    trajectories = [t for t in load("tau-airline-dev.json") if t["task_id"] < 25]
    results = {
        "dataset": "tau-airline-dev.json (tasks 0-24)",
        "llm_provider": "rules",
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "share_min_users": settings.SKILL_SHARE_MIN_USERS,
        "learned_trials": list(LEARNED_TRIALS),
        "asked_trial": ASKED_TRIAL,
        **{name: _protocol(trajectories, customer=customer) for name, customer in VARIANTS.items()},
    }
    results["effectiveness_replay"] = _effectiveness_replay(trajectories)
    write_result(output_dir, "skills", results)
    for name in VARIANTS:
        row = results[name]
        print(
            f"skills ({name}, {settings.EMBEDDING_PROVIDER}): {row['sessions']} sessions -> {row['experiences']} "
            f"experiences -> {row['skills']} skills ({row['shared_skills']} shared); a new customer's first covering "
            f"skill at rank 1 for {row['rank1']} and in the top {TOP_K} for {row[f'top{TOP_K}']} of "
            f"{row['attainable_tasks']} attainable tasks ({row['tasks_with_gold_actions']} with gold actions); after a "
            f"person shared the {row['after_one_review']['skills_shared_by_a_person']} skills of the review queue: "
            f"{row['after_one_review']['rank1']} / {row['after_one_review'][f'top{TOP_K}']}"
        )
    return results
