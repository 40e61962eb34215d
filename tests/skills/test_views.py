"""The skill API: retrieval, listing, detail, deletion, experiences and on-demand distillation."""

import uuid

import pytest

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.skills.models import Skill, SkillExperience
from apps.skills.services.evolve.run import skills_evolve
from tests.conftest import api_for
from tests.factories import ClientFactory, EndUserFactory
from tests.fixtures import tau_trajectories
from tests.skills.factories import ExperienceFactory, SkillFactory, task_session, tau_session

pytestmark = pytest.mark.django_db

BOOKING_TRANSCRIPT = [
    {"role": "user", "content": "I want to book a one way flight from New York to Seattle on May 20."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search_direct_flight", "arguments": '{"origin": "JFK", "destination": "SEA"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "search_direct_flight", "content": '[{"flight_number": "HAT136"}]'},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "book_reservation", "arguments": '{"flight": "HAT136"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "name": "book_reservation", "content": '{"reservation_id": "R1"}'},
]


def _retrieve(client, task, **extra):
    return api_for(client).post("/api/v1/skills/retrieve", {"task": task, **extra}, format="json")


def test_a_distilled_skill_is_retrievable_in_its_scope_and_invisible_outside_it(organization, rules):
    rules.EVOLUTION_DEBOUNCE_SECONDS = 0
    writer = ClientFactory(organization=organization, name="writer", write_scope="team-a", read_scopes=["team-a"])
    reader = ClientFactory(organization=organization, name="reader", write_scope=None, read_scopes=["team-a"])
    outsider = ClientFactory(organization=organization, name="outsider", write_scope="team-b", read_scopes=["team-b"])
    session = task_session(writer, messages=BOOKING_TRANSCRIPT)
    task_execute(task_id=MemoryTask.objects.get(task_type="distill_session").pk, worker="test")
    task_execute(task_id=MemoryTask.objects.get(task_type="evolve_skills").pk, worker="test")
    skill = Skill.objects.get()
    assert skill.scope == "team-a" == session.scope  # stamped with the writer's scope (the MIRIX bug)

    # One user taught it: served to that user, not (yet) to a caller naming no user (apps.skills.trust).
    response = _retrieve(reader, "book a flight to Seattle", user_id=session.end_user.user_id)
    assert response.status_code == 200, response.content
    (hit,) = response.json()["skills"]
    assert hit["id"] == str(skill.pk) and hit["name"] == skill.name and hit["score"] > 0 and hit["shared"] is False
    assert set(hit) >= {"name", "description", "instructions", "triggers", "examples", "entry_type", "version", "score"}
    assert _retrieve(reader, "book a flight to Seattle").json()["skills"] == []
    assert _retrieve(outsider, "book a flight to Seattle", user_id=session.end_user.user_id).json()["skills"] == []
    assert _retrieve(outsider, "book a flight to Seattle").json()["skills"] == []
    assert api_for(outsider).get("/api/v1/skills/").json()["results"] == []
    assert api_for(outsider).get(f"/api/v1/skills/{skill.pk}/").status_code == 404


def test_retrieval_ranks_by_the_task_returns_only_active_skills_and_counts_retrievals(client_a):
    org = client_a.organization
    booking = SkillFactory(
        organization=org,
        name="book-flight",
        description="Book a new flight reservation for a customer.",
        triggers=["book a flight to Seattle"],
    )
    SkillFactory(
        organization=org,
        name="cancel-reservation",
        description="Cancel a reservation and refund it.",
        triggers=["cancel my trip"],
    )
    SkillFactory(organization=org, name="hidden", description="Book a flight, pending review.", status="pending_review")
    SkillFactory(organization=org, name="old", description="Book a flight, archived.", status="archived")

    body = _retrieve(client_a, "please book a flight to Seattle", k=5).json()

    names = [hit["name"] for hit in body["skills"]]
    assert names[0] == "book-flight" and "hidden" not in names and "old" not in names
    scores = [hit["score"] for hit in body["skills"]]
    assert scores == sorted(scores, reverse=True)
    detail = api_for(client_a).get(f"/api/v1/skills/{booking.pk}/").json()
    assert detail["retrieval_count"] == 1 and detail["last_retrieved_at"] is not None
    assert len(_retrieve(client_a, "flight", k=1).json()["skills"]) == 1


def test_user_specific_skills_are_retrieved_only_for_their_user(client_a):
    org = client_a.organization
    alice = EndUserFactory(organization=org, user_id="alice")
    SkillFactory(
        organization=org, name="alice-booking", end_user=alice, description="Book a flight the way Alice likes."
    )
    SkillFactory(organization=org, name="shared-booking", description="Book a flight for anyone.")
    for_alice = {hit["name"] for hit in _retrieve(client_a, "book a flight", user_id="alice").json()["skills"]}
    for_bob = {hit["name"] for hit in _retrieve(client_a, "book a flight", user_id="bob").json()["skills"]}
    assert for_alice == {"alice-booking", "shared-booking"}
    assert for_bob == {"shared-booking"}


def test_a_read_only_client_may_retrieve(organization):
    reader = ClientFactory(organization=organization, write_scope=None, read_scopes=["default"])
    SkillFactory(organization=organization)
    assert _retrieve(reader, "book a flight").status_code == 200


@pytest.mark.parametrize(
    "body,field",
    [
        ({}, "task"),
        ({"task": ""}, "task"),
        ({"task": "x", "k": 0}, "k"),
        ({"task": "x", "k": 51}, "k"),
        ({"task": "x", "k": "five"}, "k"),
        ({"task": "x", "limit": 5}, "limit"),
    ],
)
def test_bad_retrieval_input_is_a_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/skills/retrieve", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error["details"] and field in error["message"]


def test_the_skill_list_filters_and_pins_its_query_count(client_a, django_assert_max_num_queries):
    org = client_a.organization
    for index in range(12):
        SkillFactory(
            organization=org,
            name=f"workflow-{index}",
            end_user=EndUserFactory(organization=org) if index % 3 == 0 else None,
        )
    SkillFactory(organization=org, name="a-guide", entry_type="guide", description="How to handle baggage fees.")
    SkillFactory(organization=org, name="waiting", status="pending_review")
    SkillFactory(organization=org, name="retired", status="archived")
    SkillFactory(organization=org, name="elsewhere", scope="other")
    api = api_for(client_a)

    with django_assert_max_num_queries(5):  # tenancy generation, key, key touch, count, page
        response = api.get("/api/v1/skills/?limit=10")
    body = response.json()
    assert body["count"] == 14 and len(body["results"]) == 10
    assert {"retired", "elsewhere"}.isdisjoint(item["name"] for item in body["results"])
    assert [item["name"] for item in api.get("/api/v1/skills/?entry_type=guide").json()["results"]] == ["a-guide"]
    assert [item["name"] for item in api.get("/api/v1/skills/?status=archived").json()["results"]] == ["retired"]
    assert [item["name"] for item in api.get("/api/v1/skills/?q=baggage").json()["results"]] == ["a-guide"]
    assert api.get("/api/v1/skills/?scope=other").json()["results"] == []  # not a read scope
    assert api.get("/api/v1/skills/?status=deleted").status_code == 400
    assert "colour" in api.get("/api/v1/skills/?colour=red").json()["error"]["details"]


def test_the_skill_detail_has_its_versions_and_their_experiences(client_a, rules):
    session = tau_session(
        client_a, next(item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"])
    )
    from apps.skills.services.distill import session_distill

    session_distill(session=session)
    skills_evolve(organization=client_a.organization, scope="default")
    skill = Skill.objects.filter(entry_type="workflow").get()

    body = api_for(client_a).get(f"/api/v1/skills/{skill.pk}/").json()
    assert body["name"] == skill.name and body["version"] == skill.version
    (version,) = body["versions"]
    assert version["operation"] == "create" and version["actor"] == "evolution:rules"
    assert version["snapshot"]["name"] == skill.name
    assert set(version["experience_ids"]) <= {str(pk) for pk in SkillExperience.objects.values_list("pk", flat=True)}
    assert version["experience_ids"]


@pytest.mark.parametrize("url", ["/api/v1/skills/{pk}/", "/api/v1/memory/procedural/{pk}"])
def test_deleting_a_skill(client_a, url):
    skill = SkillFactory(organization=client_a.organization)
    api = api_for(client_a)
    assert api.delete(url.format(pk=skill.pk)).status_code == 204
    assert not Skill.objects.filter(pk=skill.pk).exists()
    assert api.delete(url.format(pk=skill.pk)).status_code == 404


def test_a_skill_readable_but_not_writable_cannot_be_deleted(organization):
    skill = SkillFactory(organization=organization, scope="shared")
    client = ClientFactory(organization=organization, write_scope="mine", read_scopes=["mine", "shared"])
    reader = ClientFactory(organization=organization, write_scope=None, read_scopes=["shared"])
    assert api_for(client).delete(f"/api/v1/skills/{skill.pk}/").status_code == 403
    assert api_for(reader).delete(f"/api/v1/memory/procedural/{skill.pk}").status_code == 403
    assert Skill.objects.filter(pk=skill.pk).exists()


def test_the_experience_list_filters(client_a, foreign_client, django_assert_max_num_queries):
    org = client_a.organization
    ExperienceFactory(organization=org, experience_type="worth_avoiding", title="Avoid double booking")
    ExperienceFactory(organization=org, status="consumed")
    ExperienceFactory(organization=foreign_client.organization)
    api = api_for(client_a)
    with django_assert_max_num_queries(5):  # tenancy generation, key, key touch, count, page
        body = api.get("/api/v1/experiences/").json()
    assert body["count"] == 2
    assert [
        item["title"] for item in api.get("/api/v1/experiences/?experience_type=worth_avoiding").json()["results"]
    ] == ["Avoid double booking"]
    assert api.get("/api/v1/experiences/?status=consumed").json()["count"] == 1
    assert api.get("/api/v1/experiences/?status=eaten").status_code == 400


def test_distil_on_demand(client_a, add_messages, django_capture_on_commit_callbacks):
    api = api_for(client_a)
    add_messages(client_a, user_id="u", session_id="open-task", session_tag="task")
    add_messages(client_a, user_id="u", session_id="chat", session_tag="conversation", seal=True)
    assert api.post("/api/v1/sessions/open-task/distill?user_id=u").status_code == 409
    assert api.post("/api/v1/sessions/chat/distill?user_id=u").status_code == 409
    assert api.post("/api/v1/sessions/open-task/distill").status_code == 400  # user_id is required
    assert api.post("/api/v1/sessions/nope/distill?user_id=u").status_code == 404

    api.post("/api/v1/sessions/open-task/seal?user_id=u")
    response = api.post("/api/v1/sessions/open-task/distill?user_id=u")
    assert response.status_code == 202
    task = MemoryTask.objects.get(pk=response.json()["task_id"])
    assert task.task_type == "distill_session"
    assert MemoryTask.objects.filter(task_type="distill_session").count() == 1  # the seal's task, not a second one

    task_execute(task_id=task.pk, worker="test")
    again = api.post("/api/v1/sessions/open-task/distill?user_id=u")
    assert again.status_code == 409 and "already distilled" in again.json()["error"]["message"]


def test_a_read_only_client_cannot_trigger_distillation(organization, add_messages):
    writer = ClientFactory(organization=organization, write_scope="default")
    reader = ClientFactory(organization=organization, write_scope=None, read_scopes=["default"])
    add_messages(writer, user_id="u", session_id="t", session_tag="task", seal=True)
    assert api_for(reader).post("/api/v1/sessions/t/distill?user_id=u").status_code == 403


def test_malformed_skill_ids_are_plain_404s(api):
    assert api.get("/api/v1/skills/not-a-uuid/").content == api.get(f"/api/v1/skills/{uuid.uuid4()}/").content
