"""Skills that prove themselves: uses recorded by retrieval, outcomes from sealed sessions, feedback,
the effectiveness figures, the ranking adjustment and review by evidence."""

import pytest
from django.core.cache import cache

from apps.conversations.models import Session
from apps.conversations.services.ingest import messages_ingest
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.skills.effectiveness import newcombe_interval, wilson_interval
from apps.skills.models import Skill, SkillFeedback, SkillUse, SkillVersion
from apps.skills.services.evolve.llm import llm_operations
from apps.skills.services.review import EFFECTIVENESS_ACTOR
from apps.tenancy.services import end_user_get_or_create
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.skills.factories import ExperienceFactory, SkillFactory

pytestmark = pytest.mark.django_db

TURNS = [{"role": "user", "content": "Change my flight to Friday."}, {"role": "assistant", "content": "Done."}]
TASK = "change a flight reservation to another day"


def _retrieve(client, **body):
    return api_for(client).post("/api/v1/skills/retrieve", {"task": TASK, **body}, format="json")


def _seal(client, *, user_id: str, session_id: str, outcome: str) -> None:
    messages_ingest(
        client=client,
        user_id=user_id,
        session_id=session_id,
        messages=TURNS,
        session_tag="task",
        seal=True,
        outcome=outcome,
    )


def _session(client, *, number: int, outcome: str, retrieve: bool = True, k: int = 5) -> dict | None:
    """One task session of its own user: retrieve with its id, then add and seal it with `outcome`."""
    user_id, session_id = f"traveller-{number}", f"task-{number}"
    body = _retrieve(client, user_id=user_id, session_id=session_id, k=k).json() if retrieve else None
    _seal(client, user_id=user_id, session_id=session_id, outcome=outcome)
    return body


def _used_by(skill, *, client, user_id: str, session_id: str) -> SkillUse:
    """A use as a retrieval that returned this one skill records it (to steer which skill a session used)."""
    return SkillUse.objects.create(
        organization=skill.organization,
        scope=skill.scope,
        skill=skill,
        version=skill.version,
        rank=1,
        score=0.05,
        client=client,
        end_user=end_user_get_or_create(organization=client.organization, user_id=user_id),
        session_scope=client.write_scope,
        session_id=session_id,
    )


def _effectiveness(client, skill) -> dict:
    response = api_for(client).get(f"/api/v1/skills/{skill.pk}/")
    assert response.status_code == 200, response.content
    return response.json()["effectiveness"]


@pytest.fixture
def change_flight(client_a):
    return SkillFactory(
        organization=client_a.organization,
        name="change-flight",
        description="Change a flight reservation to another day.",
        triggers=["change a flight reservation"],
    )


def test_wilson_and_newcombe_intervals_match_published_values():
    # Newcombe (1998), Statistics in Medicine 17, table II, method 10; Wilson's interval for 8 of 10.
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(0, 0) is None
    assert newcombe_interval(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert newcombe_interval(9, 10, 3, 10) == pytest.approx((0.1705, 0.8090), abs=1e-4)
    assert newcombe_interval(5, 56, 0, 29) == pytest.approx((-0.0381, 0.1926), abs=1e-4)
    assert newcombe_interval(1, 1, 0, 0) is None


def test_a_retrieval_with_a_session_records_each_skill_returned_as_a_use(client_a, change_flight):
    body = _retrieve(client_a, user_id="alice", session_id="trip-1", k=3).json()

    assert body["session_id"] == "trip-1" and body["effectiveness_weight"] == 0.2
    (hit,) = body["skills"]
    assert hit["effectiveness_factor"] == 1.0 and hit["effectiveness_reason"] == "no task outcomes yet"
    assert hit["score"] == pytest.approx(hit["relevance"])
    use = SkillUse.objects.get()
    assert (use.skill_id, use.version, use.rank, use.session_id, use.session_scope) == (
        change_flight.pk,
        1,
        1,
        "trip-1",
        "default",
    )
    assert use.end_user.user_id == "alice" and use.client_id == client_a.pk and use.score == pytest.approx(hit["score"])
    # Without a session the retrieval still counts, tied to no session; no skill row is updated.
    updated_at = Skill.objects.get().updated_at
    _retrieve(client_a)
    assert SkillUse.objects.filter(session_id="").count() == 1
    assert Skill.objects.get().updated_at == updated_at
    assert api_for(client_a).get("/api/v1/skills/").json()["results"][0]["retrieval_count"] == 2


def test_a_session_needs_its_user_and_a_client_that_writes(client_a, change_flight):
    response = _retrieve(client_a, session_id="trip-1")
    assert response.status_code == 400 and "user_id" in response.json()["error"]["details"]
    reader = ClientFactory(organization=client_a.organization, name="reader", write_scope=None)
    response = _retrieve(reader, user_id="alice", session_id="trip-1")
    assert response.status_code == 400 and "session_id" in response.json()["error"]["details"]
    response = _retrieve(client_a, user_id="alice", session_id="no spaces allowed")
    assert response.status_code == 400 and "session_id" in response.json()["error"]["details"]
    assert not SkillUse.objects.exists()


def test_a_sealed_sessions_outcome_counts_for_the_skills_it_retrieved(client_a, change_flight):
    _session(client_a, number=1, outcome="failure")
    _session(client_a, number=2, outcome="success")
    _session(client_a, number=3, outcome="success", retrieve=False)  # the comparison group
    _retrieve(client_a, user_id="user-4", session_id="task-4")  # retrieved, never sealed: no outcome yet
    _seal(client_a, user_id="user-5", session_id="task-5", outcome="unknown")

    figures = _effectiveness(client_a, change_flight)

    assert (figures["uses"], figures["sessions"], figures["users"], figures["successes"], figures["failures"]) == (
        3,
        2,
        2,
        1,
        1,
    )
    assert figures["success_rate"] == 0.5 and figures["success_rate_interval"] == pytest.approx(
        wilson_interval(1, 2), abs=1e-4
    )
    assert (figures["baseline_users"], figures["baseline_successes"], figures["lift"]) == (1, 1, -0.5)
    assert figures["lift_interval"] == pytest.approx(newcombe_interval(1, 2, 1, 1), abs=1e-4)
    (version,) = figures["versions"]
    assert version["version"] == 1 and version["sessions"] == 2


def test_an_outcome_set_after_sealing_is_the_one_that_counts(client_a, change_flight):
    _session(client_a, number=1, outcome="unknown")
    assert _effectiveness(client_a, change_flight)["sessions"] == 0
    response = api_for(client_a).patch(
        "/api/v1/sessions/task-1/?user_id=traveller-1", {"outcome": "success"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert _effectiveness(client_a, change_flight)["successes"] == 1


def test_applied_marks_the_uses_of_the_session_and_needs_a_retrieval(client_a, change_flight):
    _retrieve(client_a, user_id="alice", session_id="trip-1")
    _retrieve(client_a, user_id="alice", session_id="trip-1")
    url = f"/api/v1/skills/{change_flight.pk}/uses"

    response = api_for(client_a).post(url, {"user_id": "alice", "session_id": "trip-1"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["applied"] == 2 and SkillUse.objects.filter(applied_at__isnull=False).count() == 2
    assert _effectiveness(client_a, change_flight)["applied"] == 2
    response = api_for(client_a).post(url, {"user_id": "alice", "session_id": "trip-2"}, format="json")
    assert response.status_code == 409 and "retrieve it" in response.json()["error"]["message"]


def test_feedback_is_recorded_with_its_actor_and_counted(client_a, change_flight):
    url = f"/api/v1/skills/{change_flight.pk}/feedback"
    body = {"user_id": "alice", "session_id": "trip-1", "verdict": "hurt", "reason": "The fare rule changed."}
    _seal(client_a, user_id="alice", session_id="trip-1", outcome="failure")

    response = api_for(client_a).post(url, body, format="json")

    assert response.status_code == 201, response.content
    answer = response.json()
    assert (answer["verdict"], answer["actor"], answer["version"], answer["user_id"]) == (
        "hurt",
        "client:agent-a",
        1,
        "alice",
    )
    feedback = SkillFeedback.objects.get()
    assert feedback.client_id == client_a.pk and feedback.reason == "The fare rule changed."
    assert _effectiveness(client_a, change_flight)["feedback"] == {"helped": 0, "hurt": 1, "irrelevant": 0}
    response = api_for(client_a).post(url, {**body, "verdict": "meh"}, format="json")
    assert response.status_code == 400 and "verdict" in response.json()["error"]["details"]
    reader = ClientFactory(organization=client_a.organization, name="reader", write_scope=None)
    assert api_for(reader).post(url, body, format="json").status_code == 403
    assert SkillFeedback.objects.count() == 1


def test_ranking_adjustment_is_bounded_and_lifts_a_proven_skill_over_an_equal_one(client_a, settings):
    settings.SKILL_EFFECTIVENESS_WEIGHT = 0.3
    org = client_a.organization
    texts = dict(description="Change a flight reservation to another day.", triggers=["change a flight reservation"])
    proven = SkillFactory(organization=org, name="change-flight-b", **texts)
    other = SkillFactory(organization=org, name="change-flight-a", **texts)
    # Without evidence the tie goes to the name: `change-flight-a` first.
    assert [hit["name"] for hit in _retrieve(client_a, k=2).json()["skills"]] == ["change-flight-a", "change-flight-b"]
    for number in range(10):
        _session(client_a, number=number, outcome="success" if number % 2 else "failure", retrieve=False)
    for number, (skill, outcome) in enumerate([(proven, "success"), (other, "failure")] * 20, start=10):
        _used_by(skill, client=client_a, user_id=f"traveller-{number}", session_id=f"task-{number}")
        _seal(client_a, user_id=f"traveller-{number}", session_id=f"task-{number}", outcome=outcome)

    cache.clear()  # the evidence retrieval reads is kept RANKING_CACHE_SECONDS
    hits = _retrieve(client_a, k=2).json()["skills"]

    assert [hit["name"] for hit in hits] == ["change-flight-b", "change-flight-a"]
    # Equal texts: the fused ranks differ by one place, and the evidence outweighs that.
    assert hits[0]["relevance"] <= hits[1]["relevance"] < 1.05 * hits[0]["relevance"]
    assert 1 < hits[0]["effectiveness_factor"] <= 1.3 and 0.7 <= hits[1]["effectiveness_factor"] < 1
    assert "users succeeded" in hits[0]["effectiveness_reason"]
    assert hits[0]["score"] == pytest.approx(hits[0]["relevance"] * hits[0]["effectiveness_factor"])


def test_a_few_outcomes_do_not_move_a_skill_before_they_are_evidence(client_a, settings):
    settings.SKILL_EFFECTIVENESS_WEIGHT = 0.3
    org = client_a.organization
    texts = dict(description="Change a flight reservation to another day.", triggers=["change a flight reservation"])
    lucky = SkillFactory(organization=org, name="change-flight-b", **texts)
    SkillFactory(organization=org, name="change-flight-a", **texts)
    for number in range(10):
        _session(client_a, number=number, outcome="success" if number % 2 else "failure", retrieve=False)
    for number in range(10, 13):  # three successes in a row: a rate of 100 %, an interval that holds the scope's
        _used_by(lucky, client=client_a, user_id=f"traveller-{number}", session_id=f"task-{number}")
        _seal(client_a, user_id=f"traveller-{number}", session_id=f"task-{number}", outcome="success")

    cache.clear()
    hits = _retrieve(client_a, k=2).json()["skills"]

    assert [hit["name"] for hit in hits] == ["change-flight-a", "change-flight-b"]
    assert hits[1]["effectiveness_factor"] == 1.0
    assert "not yet told apart" in hits[1]["effectiveness_reason"]


def test_a_weight_of_zero_is_relevance_alone(client_a, change_flight, settings):
    settings.SKILL_EFFECTIVENESS_WEIGHT = 0
    _session(client_a, number=1, outcome="failure")
    (hit,) = _retrieve(client_a).json()["skills"]
    assert hit["effectiveness_factor"] == 1.0 and hit["score"] == hit["relevance"]


def test_a_skill_whose_lift_lies_below_zero_goes_to_review_with_its_figures(client_a, change_flight, settings):
    settings.SKILL_REVIEW_MIN_USERS = 6
    settings.LLM_PROVIDER = "rules"
    for number in range(10):
        _session(client_a, number=number, outcome="success", retrieve=False)
    distill = MemoryTask.objects.filter(task_type="distill_session")
    for number in range(10, 19):
        _session(client_a, number=number, outcome="failure")
        task = distill.get(payload__session=str(_last_session_pk()))
        assert task_execute(task_id=task.pk, worker="test") == "succeeded"
        task.refresh_from_db()
        assert task.result["sent_to_review"] == [], number
    # Nine failures in nine against ten successes in ten: past the minimum, but young evidence is
    # judged on a wider interval (review_z), whose upper end is still above zero.
    change_flight.refresh_from_db()
    assert change_flight.status == Skill.Status.ACTIVE
    assert _effectiveness(client_a, change_flight)["lift_interval"][1] < 0  # the 95% interval alone would flag it

    _session(client_a, number=19, outcome="failure")
    task_execute(task_id=distill.get(payload__session=str(_last_session_pk())).pk, worker="test")

    change_flight.refresh_from_db()
    assert change_flight.status == Skill.Status.PENDING_REVIEW
    note = SkillVersion.objects.get(skill=change_flight, version=change_flight.version)
    assert note.actor == EFFECTIVENESS_ACTOR
    assert "0 of 10 users" in note.reason and "10 of 10" in note.reason and "lift -1.00" in note.reason
    assert "review interval (z = 4.58)" in note.reason
    assert not _retrieve(client_a).json()["skills"]  # held for a person; nothing deleted
    assert Skill.objects.filter(pk=change_flight.pk).exists()


def _last_session_pk():
    return Session.objects.order_by("-created_at").values_list("pk", flat=True).first()


def test_evolution_reads_a_skills_failures_as_worth_avoiding(client_a, change_flight, fake_openai):
    _session(client_a, number=1, outcome="failure")
    _session(client_a, number=2, outcome="success")
    fake_openai.add_json({"operations": []})
    experience = ExperienceFactory(organization=client_a.organization, scope="default")

    llm_operations(organization=client_a.organization, scope="default", pending=[experience], budget=3)

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert '"worth_avoiding": "1 of 2 users whose task sessions retrieved it failed' in prompt
