"""tau-bench task path: import 100 real airline trajectories as task sessions, distil and evolve them
with the rule-based learner, then retrieve the top-5 skills for each trajectory's first user turn.

Reports experiences and skills created, sessions per second through distill+evolve, and the
share of requests whose top-5 holds a skill whose action signature covers the task's gold
action names (`info.task.actions`), retrieved as the trajectory's user (shared skills and that
user's own) and, beside it, naming no user (shared skills only).
"""

import json
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from bench.data import data_file

SCOPE = "bench-airline"
TOP_K = 5


def _first_user_turn(trajectory: dict) -> str:
    return next((m.get("content") or "" for m in trajectory["traj"] if m["role"] == "user"), "")


def _import(client, trajectories) -> tuple[list, int]:
    """Through the same ingest service as the API, sealed, as task sessions with outcome from reward."""
    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.conversations.models import Session
    from apps.conversations.services import messages_ingest

    messages = 0
    for item in trajectory_sessions(trajectories):
        body = messages_ingest(
            client=client,
            user_id=item["user_id"],
            session_id=item["session_id"],
            messages=item["messages"],
            session_tag="task",
            seal=True,
            outcome=item["outcome"],
        )
        messages += body["messages_stored"]
    sessions = list(
        Session.objects.filter(organization=client.organization).select_related("organization").order_by("session_id")
    )
    return sessions, messages


def run(output_dir) -> dict:
    from django.conf import settings
    from django.test.utils import override_settings

    from apps.pipeline.locks import advisory_lock
    from apps.pipeline.models import MemoryTask
    from apps.pipeline.services import tasks_cancel
    from apps.skills.models import Skill, SkillExperience
    from apps.skills.services.distill import distill_lock_key, session_distill
    from apps.skills.services.evolve.run import evolve_key, skills_evolve
    from apps.skills.services.retrieve import skills_rank
    from apps.tenancy.services import client_create, organization_create

    trajectories = json.loads(data_file("tau-airline-dev.json").read_text())
    organization = organization_create(name=f"bench-skills-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto"):
            client, _ = client_create(organization=organization, name="bench", write_scope=SCOPE, read_scopes=[SCOPE])
            started = time.perf_counter()
            sessions, messages = _import(client, trajectories)
            import_seconds = time.perf_counter() - started
            # The benchmark runs the learners itself; a worker must not race it for the queued rows.
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))

            started = time.perf_counter()
            for session in sessions:
                with advisory_lock(distill_lock_key(session)):
                    session_distill(session=session)
            distill_seconds = time.perf_counter() - started
            started = time.perf_counter()
            runs = 0
            while True:
                with advisory_lock(evolve_key(organization=organization, scope=SCOPE)):
                    result = skills_evolve(organization=organization, scope=SCOPE)
                runs += 1
                if not result["remaining"] or not (result["consumed"] or result["superseded"]):
                    break
            evolve_seconds = time.perf_counter() - started
            tasks_cancel(queryset=MemoryTask.objects.filter(organization=organization))

            skills = {skill.pk: skill for skill in Skill.objects.filter(organization=organization, status="active")}
            latencies, covered, covered_shared, with_gold, reachable = [], 0, 0, 0, 0
            for trajectory in trajectories:
                gold = {action["name"] for action in trajectory["info"]["task"]["actions"]}
                # As an agent acting for the trajectory's user asks: the scope's shared skills and
                # those that user taught (apps.skills.trust).
                user_id = trajectory["info"]["task"].get("user_id") or "imported"
                started = time.perf_counter()
                hits = skills_rank(reader=client.reader, task=_first_user_turn(trajectory), k=TOP_K, user_id=user_id)
                latencies.append(time.perf_counter() - started)
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
        learn_seconds = distill_seconds + evolve_seconds
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
            "import_seconds": round(import_seconds, 3),
            "distill_seconds": round(distill_seconds, 3),
            "evolve_seconds": round(evolve_seconds, 3),
            "sessions_per_second": round(len(sessions) / learn_seconds, 2) if learn_seconds else None,
            "requests": len(trajectories),
            "requests_with_gold_actions": with_gold,
            f"top{TOP_K}_covers_gold_actions": round(covered / with_gold, 4) if with_gold else None,
            f"top{TOP_K}_shared_only_covers_gold_actions": round(covered_shared / with_gold, 4) if with_gold else None,
            "shared_skills": sum(1 for skill in skills.values() if skill.shared),
            "share_min_users": settings.SKILL_SHARE_MIN_USERS,
            "any_skill_covers_gold_actions": round(reachable / with_gold, 4) if with_gold else None,
            "retrieval_p50_ms": round(statistics.median(latencies) * 1000, 2),
            "retrieval_p95_ms": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))] * 1000, 2),
        }
    finally:
        organization.delete()

    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / "skills.json").write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"skills (tau-bench airline, rules): {results['sessions']} sessions -> {results['experiences']} experiences "
        f"-> {results['skills']} skills; {results['sessions_per_second']} sessions/s through distill+evolve; "
        f"top-{TOP_K} covers gold actions for {results[f'top{TOP_K}_covers_gold_actions']:.1%} of "
        f"{with_gold} requests (any skill: {results['any_skill_covers_gold_actions']:.1%})"
    )
    return results


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    django.setup()
    run(Path(__file__).resolve().parent / "results")
    sys.exit(0)
