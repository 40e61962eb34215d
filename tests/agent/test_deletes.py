"""DELETE of a whole session (202 + task), an experience, a profile and an entity: what was learned
only from them goes, what others also taught stays."""

import pytest

from apps.conversations.models import Message, Session
from apps.memories.models import SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Edge, Entity, Mention, Profile
from apps.skills.models import Skill, SkillExperience
from tests.memories.makers import semantic
from tests.skills.makers import make_experience

pytestmark = pytest.mark.django_db


def test_a_session_goes_with_what_was_learned_only_from_it(pages, api, client_a, add_messages, run_tasks):
    add_messages(
        client_a,
        user_id="caroline",
        session_id="chat-2",
        messages=[{"role": "user", "name": "Caroline", "content": "Jon and I adopted a puppy."}],
    )
    chat1, chat2 = (Session.objects.get(session_id=sid) for sid in ("chat-1", "chat-2"))
    turn1 = Message.objects.filter(session=chat1).first()
    turn2 = Message.objects.get(session=chat2)
    semantic(
        client_a.organization, "default", "caroline", "Jon", "Jon helped with forms.", source_message_ids=[turn1.pk]
    )
    shared = semantic(
        client_a.organization, "default", "caroline", "Jon", "Jon is kind.", source_message_ids=[turn1.pk, turn2.pk]
    )
    elsewhere = semantic(
        client_a.organization, "default", "caroline", "Jon", "Jon has a puppy.", source_message_ids=[turn2.pk]
    )
    stated = semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline is vegetarian.")
    experience = make_experience(client_a, "caroline", "a lesson from chat-1")
    SkillExperience.objects.filter(pk=experience.pk).update(session=chat1)
    MemoryTask.objects.all().delete()

    response = api.delete("/api/v1/sessions/chat-1/?user_id=caroline")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["session_id"], body["user_id"], body["scope"], body["status"]) == (
        "chat-1",
        "caroline",
        "default",
        "queued",
    )
    assert api.get(f"/api/v1/tasks/{body['task_id']}/").json()["task_type"] == "delete_session"
    run_tasks("delete_session", "lint_profiles")

    assert MemoryTask.objects.get(pk=body["task_id"]).status == "succeeded"
    assert not Session.objects.filter(pk=chat1.pk).exists() and not Message.objects.filter(session_id=chat1.pk).exists()
    # A memory citing one of its turns goes too (the provenance rule, as in erasure); the other
    # turn it cited is learned again, so what it says of chat-2 comes back from chat-2 alone.
    assert set(SemanticMemory.objects.values_list("pk", flat=True)) == {elsewhere.pk, stated.pk}
    assert not SemanticMemory.objects.filter(pk=shared.pk).exists()
    assert not SkillExperience.objects.filter(pk=experience.pk).exists()
    assert not Mention.objects.filter(session_id=chat1.pk).exists()
    assert Session.objects.filter(pk=chat2.pk).exists() and Message.objects.filter(pk=turn2.pk).exists()
    # Every page quoted chat-1 only: cleared for recompiling, with nothing of chat-1 left in their history.
    for profile in Profile.objects.all():
        assert not profile.sources.exists() and "Jon helped me" not in profile.markdown
        assert all("Jon helped me" not in revision.markdown for revision in profile.revisions.all())
    assert api.get("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 404


def test_deleting_a_session_needs_its_owner_and_write_access(api, client_a, add_messages):
    add_messages(client_a, user_id="caroline", session_id="chat-1")
    assert api.delete("/api/v1/sessions/chat-1/").status_code == 400  # user_id is required
    assert api.delete("/api/v1/sessions/chat-1/?user_id=someone").status_code == 404
    assert not MemoryTask.objects.filter(task_type="delete_session").exists()


def test_a_session_accepted_for_deletion_reads_as_gone_before_its_purge_runs(api, client_a, add_messages):
    add_messages(client_a, user_id="caroline", session_id="chat-1")
    assert api.get("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 200

    assert api.delete("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 202

    assert MemoryTask.objects.filter(task_type="delete_session", status="queued").exists()
    assert api.get("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 404
    assert api.post("/api/v1/sessions/chat-1/seal?user_id=caroline").status_code == 404
    assert api.delete("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 404
    assert (
        api.post(
            "/api/v1/memory/context", {"user_id": "caroline", "session_id": "chat-1", "query": "hi"}, format="json"
        ).status_code
        == 404
    )


def test_a_session_accepted_for_deletion_leaves_the_list_at_once(api, client_a, add_messages):
    add_messages(client_a, user_id="caroline", session_id="chat-1")
    add_messages(client_a, user_id="caroline", session_id="chat-2")

    assert api.delete("/api/v1/sessions/chat-1/?user_id=caroline").status_code == 202

    listed = api.get("/api/v1/sessions/?user_id=caroline").json()
    assert [session["session_id"] for session in listed["results"]] == ["chat-2"]
    assert listed["count"] == 1


def test_an_experience_goes_with_the_skills_built_on_it_alone(api, client_a):
    from apps.skills.services.skills import skill_create

    lesson = make_experience(client_a, "caroline", "retry the fare search after a timeout")
    other = make_experience(client_a, "caroline", "hold the seat before paying")
    alone = skill_create(
        organization=client_a.organization,
        scope="default",
        actor="test",
        reason="test",
        status="active",
        fields={"name": "retry", "description": "retry", "instructions": "retry", "entry_type": "guide"},
        experiences=[lesson],
    )
    both = skill_create(
        organization=client_a.organization,
        scope="default",
        actor="test",
        reason="test",
        status="active",
        fields={"name": "book", "description": "book", "instructions": "book", "entry_type": "guide"},
        experiences=[lesson, other],
    )
    assert api.delete(f"/api/v1/experiences/{lesson.pk}/").status_code == 204
    assert (
        not SkillExperience.objects.filter(pk=lesson.pk).exists()
        and SkillExperience.objects.filter(pk=other.pk).exists()
    )
    assert not Skill.objects.filter(pk=alone.pk).exists()
    both.refresh_from_db()
    assert both.status == "pending_review"
    assert api.delete(f"/api/v1/experiences/{lesson.pk}/").status_code == 404


def test_a_profile_and_an_entity_can_be_deleted(pages, api):
    jon = pages["Jon"]
    assert api.get(f"/api/v1/profiles/{jon.pk}/findings").json() == {"profile_id": str(jon.pk), "findings": []}
    assert api.delete(f"/api/v1/profiles/{jon.pk}/").status_code == 204
    assert not Profile.objects.filter(pk=jon.pk).exists() and Entity.objects.filter(pk=jon.entity_id).exists()
    assert api.get(f"/api/v1/profiles/{jon.pk}/").status_code == 404

    melanie = pages["Melanie"].entity
    assert Edge.objects.filter(source=melanie).exists() or Edge.objects.filter(target=melanie).exists()
    assert api.delete(f"/api/v1/entities/{melanie.pk}/").status_code == 204
    assert (
        not Entity.objects.filter(pk=melanie.pk).exists() and not Mention.objects.filter(entity_id=melanie.pk).exists()
    )
    names = {entity["name"] for entity in api.get("/api/v1/entities/?user_id=caroline").json()["results"]}
    assert names == {"Caroline", "Jon", "Yosemite"}
