"""Review by evidence weighs end users, not sessions (issue 39): one user, one client from another
scope or one shill cannot move a skill; a person's approval starts a new window; a retrieval of many
skills charges only the top ranks and the ones applied; an erasure re-judges what its subject moved."""

import pytest

from apps.pipeline.services import task_execute
from apps.skills.effectiveness import review_evidence
from apps.skills.models import Skill, SkillVersion
from apps.skills.services.review import EFFECTIVENESS_ACTOR, skill_approve
from apps.skills.services.skills import skill_return_to_review
from harness.review_world import TASK, build_world, trigger
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def eraser(client_a):
    return ClientFactory(organization=client_a.organization, name="privacy-desk", can_erase=True)


def erase(client, user_id: str) -> None:
    response = api_for(client).delete(f"/api/v1/users/{user_id}/memories")
    assert response.status_code == 202, response.content
    assert task_execute(task_id=response.json()["task_id"], worker="test") == "succeeded"


def test_one_user_with_any_number_of_failing_sessions_moves_no_good_skill(client_a):
    # Each skill succeeded for each of its 10 users; one user then fails 30 sessions that retrieve all
    # ten skills at once (k=50): the attack that sent every shared skill of a scope to review.
    world = build_world(client_a, skills=10)
    for _ in range(30):
        world.session(user_id="attacker", outcome="failure", k=50)

    assert world.sent_to_review() == []
    for skill in world.skills:  # 30 sessions, one voice (for the skills at the top of its retrievals)
        evidence, _ = review_evidence(skill)
        assert (evidence.successes, evidence.failures) in ((10, 0), (10, 1)), skill.name


def test_a_client_reading_the_scope_from_another_write_scope_moves_no_skill(client_a):
    world = build_world(client_a, skills=3)
    outsider = ClientFactory(
        organization=client_a.organization,
        name="outsider",
        write_scope="elsewhere",
        read_scopes=["default", "elsewhere"],
    )
    for number in range(30):  # many users of its own: their sessions are not in the skills' scope
        world.client = outsider
        world.session(user_id=f"outsider-user-{number}", outcome="failure", k=50)

    assert world.sent_to_review() == []
    assert review_evidence(world.skills[0])[0].users == 10


def test_a_shill_cannot_keep_a_failing_skill_out_of_review(client_a):
    world = build_world(client_a, skills=1, honest=0)
    (skill,) = world.skills
    for _ in range(60):
        world.session(user_id="shill", outcome="success", task=trigger(skill))
    for number in range(25):
        world.session(user_id=f"unlucky-{number}", outcome="failure", task=trigger(skill))

    assert world.sent_to_review() == [skill.name]
    note = SkillVersion.objects.filter(skill=skill).order_by("-version").first()
    assert note.actor == EFFECTIVENESS_ACTOR and "1 of 20 users" in note.reason


def test_a_persons_approval_starts_a_new_evidence_window(client_a, settings):
    world = build_world(client_a, skills=1, honest=0)
    (skill,) = world.skills
    for number in range(20):
        world.session(user_id=f"unlucky-{number}", outcome="failure", task=trigger(skill))
    assert world.sent_to_review() == [skill.name]

    skill.refresh_from_db()
    approved = skill_approve(skill=skill, actor="admin:curator", reason="The fare table was fixed.")
    world.session(user_id="after-approval-0", outcome="failure", task=trigger(skill))

    assert world.sent_to_review() == []  # one more failure does not undo a person's decision
    evidence, since = review_evidence(skill)
    assert since == approved.version and (evidence.users, evidence.failures) == (1, 1)
    for number in range(1, settings.SKILL_REVIEW_MIN_USERS):
        world.session(user_id=f"after-approval-{number}", outcome="failure", task=trigger(skill))
    assert world.sent_to_review() == [skill.name]  # enough new users after it still count


def test_a_large_k_charges_only_the_top_ranks_and_the_skills_applied(client_a, settings):
    settings.SKILL_EFFECTIVENESS_WEIGHT = 0  # relevance alone: the same ranking for every session
    world = build_world(client_a, skills=10)
    ranked = [hit["name"] for hit in world.session(user_id="probe", outcome="success", k=50)["skills"]]
    assert len(ranked) == 10
    top, rest, followed = ranked[:3], ranked[6:9], ranked[9]
    followed_skill = next(skill for skill in world.skills if skill.name == followed)
    ever_top = set(top)
    for number in range(12):
        hits = world.session(user_id=f"unlucky-{number}", outcome="failure", k=50, applied=[followed_skill])
        ever_top |= {hit["name"] for hit in hits["skills"][:3]}

    # The three at the top were charged (and sent), and the one the agents followed; after the top
    # three left, the next three were charged by the last few sessions only.
    assert followed in world.sent_to_review() and set(world.sent_to_review()) <= ever_top | {followed}
    for skill in world.skills:
        # Returned by all 13 retrievals, never in the top three (equal scores may swap places), never applied.
        if skill.name in rest and skill.name not in ever_top:
            assert review_evidence(skill)[0].failures == 0, skill.name


def test_erasing_the_user_whose_sessions_sent_a_skill_to_review_puts_it_back(client_a, eraser):
    # As main did it: one user's 30 failing sessions sent a good skill to review.
    world = build_world(client_a, skills=2)
    good, other = world.skills
    for _ in range(30):
        world.session(user_id="attacker", outcome="failure", task=trigger(good))
    good.refresh_from_db()
    skill_return_to_review(skill=good, changes={}, actor=EFFECTIVENESS_ACTOR, reason="Sent to review by its outcomes.")
    other.refresh_from_db()
    skill_return_to_review(skill=other, changes={}, actor="admin:curator", reason="A person wants another look.")

    erase(eraser, "attacker")

    assert world.statuses() == {good.name: Skill.Status.ACTIVE, other.name: Skill.Status.PENDING_REVIEW}
    good.refresh_from_db()
    note = SkillVersion.objects.get(skill=good, version=good.version)
    assert note.actor == EFFECTIVENESS_ACTOR and note.reason.startswith("Back in service")


def test_an_erasure_re_judges_a_skill_on_the_evidence_left(client_a, eraser, settings):
    world = build_world(client_a, skills=2, honest=0, baseline=40)
    barely, clearly = world.skills
    for number in range(settings.SKILL_REVIEW_MIN_USERS):
        world.session(user_id=f"barely-{number}", outcome="failure", task=trigger(barely))
    for number in range(settings.SKILL_REVIEW_MIN_USERS + 5):
        world.session(user_id=f"clearly-{number}", outcome="failure", task=trigger(clearly))
    assert world.sent_to_review() == sorted([barely.name, clearly.name])

    erase(eraser, "barely-0")

    # One user fewer: `barely` no longer has the users review needs; `clearly` still does.
    assert world.statuses() == {barely.name: Skill.Status.ACTIVE, clearly.name: Skill.Status.PENDING_REVIEW}


def test_the_review_window_and_its_figures_are_in_the_skill_detail(client_a):
    world = build_world(client_a, skills=1, honest=3)
    (skill,) = world.skills
    world.session(user_id="repeat", outcome="failure", task=trigger(skill))
    world.session(user_id="repeat", outcome="failure", task=trigger(skill))
    world.session(user_id="repeat", outcome="success", task=TASK, k=1)

    figures = api_for(client_a).get(f"/api/v1/skills/{skill.pk}/").json()["effectiveness"]

    assert (figures["sessions"], figures["users"], figures["successes"], figures["failures"]) == (6, 4, 3, 1)
    assert (figures["baseline_users"], figures["baseline_successes"]) == (10, 9)
    review = figures["review"]
    assert (review["since_version"], review["users"], review["harmful"]) == (1, 4, False)
