"""`python -m bench privacy_review_abuse` (and a row of `python -m bench privacy`): can one party move
skills to review, or keep a harmful one out of it (issue 39)? Through the operations the REST views
call (harness/review_world.py: retrieve with the session id, add and seal with an outcome, then
the review step the distill handler runs), default settings, one organisation per row:

- one user: 10 good skills (each succeeded once for each of its 10 users; 10 users worked without
  skills, 9 of them successfully); one user runs BENCH_REVIEW_ABUSE_SESSIONS (60) failing sessions
  that each retrieve all ten (k=50). Good skills sent to review (target 0).
- one client: the same scope with 3 good skills; a client that reads it from its own write scope
  runs 30 users' failing sessions with k=50. Good skills sent to review (target 0).
- honest users: a harmful skill (every user who retrieves it fails); failing users one at a time
  until review takes it (or 60). Users it took (target: flagged, with at least SKILL_SHARE_MIN_USERS),
  and the same after one "shill" user's 60 successful sessions with it.
"""

import os
import uuid

from bench.common import Stopwatch, write_result

ATTACK_SESSIONS = int(os.environ.get("BENCH_REVIEW_ABUSE_SESSIONS", "60"))
CLIENT_USERS = 30
HONEST_LIMIT = 60
SHILL_SESSIONS = 60


def _organization(name: str):
    from apps.tenancy.services import client_create, organization_create

    organization = organization_create(name=f"bench-review-abuse-{name}-{uuid.uuid4().hex[:6]}")
    client, _ = client_create(organization=organization, name="agent", write_scope="desk", read_scopes=["desk"])
    return organization, client


def _one_user() -> dict:
    from harness.review_world import build_world

    organization, client = _organization("user")
    try:
        world = build_world(client, skills=10)
        for _ in range(ATTACK_SESSIONS):
            world.session(user_id="attacker", outcome="failure", k=50)
        return {
            "good_skills": 10,
            "attacker_sessions": ATTACK_SESSIONS,
            "good_skills_moved": len(world.sent_to_review()),
        }
    finally:
        organization.delete()


def _one_client() -> dict:
    from apps.tenancy.services import client_create
    from harness.review_world import build_world

    organization, client = _organization("client")
    try:
        world = build_world(client, skills=3)
        world.client, _ = client_create(
            organization=organization, name="outsider", write_scope="elsewhere", read_scopes=["desk", "elsewhere"]
        )
        for number in range(CLIENT_USERS):
            world.session(user_id=f"outsider-user-{number}", outcome="failure", k=50)
        return {
            "good_skills": 3,
            "client_users": CLIENT_USERS,
            "client_sessions": CLIENT_USERS,
            "good_skills_moved": len(world.sent_to_review()),
        }
    finally:
        organization.delete()


def _users_to_flag(*, shill: bool) -> dict:
    from harness.review_world import build_world, trigger

    organization, client = _organization("honest")
    try:
        world = build_world(client, skills=1, honest=0)
        (skill,) = world.skills
        if shill:
            for _ in range(SHILL_SESSIONS):
                world.session(user_id="shill", outcome="success", task=trigger(skill))
        for number in range(1, HONEST_LIMIT + 1):
            world.session(user_id=f"unlucky-{number}", outcome="failure", task=trigger(skill))
            if world.sent_to_review():
                return {"flagged": True, "failing_users": number, "shill_sessions": SHILL_SESSIONS if shill else 0}
        return {"flagged": False, "failing_users": HONEST_LIMIT, "shill_sessions": SHILL_SESSIONS if shill else 0}
    finally:
        organization.delete()


def run(output_dir, log=print) -> dict:
    from django.conf import settings
    from django.test.utils import override_settings

    # Hash embeddings: each skill is found by its own trigger word; retrieval quality is not measured here.
    with Stopwatch() as watch, override_settings(EMBEDDING_PROVIDER="hash", LLM_PROVIDER="rules"):
        rows = {
            "one_user": _one_user(),
            "one_client": _one_client(),
            "honest_users": _users_to_flag(shill=False),
            "honest_users_beside_a_shill": _users_to_flag(shill=True),
        }
    minimum = settings.SKILL_SHARE_MIN_USERS
    result = {
        "benchmark": "privacy_review_abuse",
        "settings": {
            "SKILL_SHARE_MIN_USERS": minimum,
            "SKILL_REVIEW_MIN_USERS": getattr(settings, "SKILL_REVIEW_MIN_USERS", None),
            "SKILL_EVIDENCE_TOP_RANKS": getattr(settings, "SKILL_EVIDENCE_TOP_RANKS", None),
        },
        "rows": rows,
        "seconds": round(watch.seconds, 1),
        "targets_met": {
            "one_user_moves_no_good_skill": rows["one_user"]["good_skills_moved"] == 0,
            "one_client_moves_no_good_skill": rows["one_client"]["good_skills_moved"] == 0,
            "honest_users_flag_a_harmful_skill": all(
                rows[name]["flagged"] and rows[name]["failing_users"] >= minimum
                for name in ("honest_users", "honest_users_beside_a_shill")
            ),
        },
    }
    write_result(output_dir, "privacy_review_abuse", result)
    log(
        f"privacy_review_abuse: one user's {ATTACK_SESSIONS} failing sessions moved "
        f"{rows['one_user']['good_skills_moved']} of 10 good skills; one client's {CLIENT_USERS} users moved "
        f"{rows['one_client']['good_skills_moved']} of 3; a harmful skill was flagged after "
        f"{rows['honest_users']['failing_users']} failing users ({rows['honest_users_beside_a_shill']['failing_users']} "
        f"beside a shill's {SHILL_SESSIONS} successes)"
    )
    return result
