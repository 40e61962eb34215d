"""DELETE of a whole session (202 + task), an experience, a profile, an entity and a memory: what was
learned only from them goes, what others also taught stays, and nothing quotes them after."""

import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from memory_platform_client.contract import TOOLS_BY_NAME

from apps.conversations.models import Message, Session
from apps.mcp_server.backend import PlatformBackend
from apps.memories.models import SemanticMemory
from apps.pipeline.locks import WorkOf, advisory_lock, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.profiles.handlers import OWNER_LOCKS
from apps.profiles.models import Edge, Entity, Mention, Profile
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.skills.models import Skill, SkillExperience
from harness.provenance_world import residue
from tests.conftest import api_for
from tests.memories.makers import semantic
from tests.profiles.conftest import conversation, pages, rules, run_tasks  # noqa: F401  (shared fixtures)
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


# A memory (issue 39, finding 3) -------------------------------------------------------------------

NOTEBOOK = "zanthoric"  # only the memory about to be deleted says it


@pytest.fixture
def quoted(conversation, client_a, rules):
    """A fact learned from Caroline's conversation, quoted by her compiled page."""
    turn = Message.objects.filter(session=conversation).order_by("seq").first()
    memory = semantic(
        client_a.organization,
        "default",
        "caroline",
        "Caroline",
        f"Caroline keeps a {NOTEBOOK} notebook of hikes.",
        source_message_ids=[turn.pk],
        created_by=client_a,
    )
    session_project(session=conversation)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    assert {"profiles.ProfileRevision.markdown", "profiles.ProfileSource.quote"} <= set(residue(NOTEBOOK))
    MemoryTask.objects.all().delete()
    return memory


def _delete_memory_over_rest(client, memory):
    assert api_for(client).delete(f"/api/v1/memory/semantic/{memory.pk}").status_code == 204


def _delete_memory_over_mcp(client, memory):
    async_to_sync(PlatformBackend(client=client, executor=None).call)(
        TOOLS_BY_NAME["delete_memory"], {"memory_type": "semantic", "memory_id": str(memory.pk)}
    )


@pytest.mark.parametrize("delete", [_delete_memory_over_rest, _delete_memory_over_mcp], ids=["rest", "mcp"])
def test_a_deleted_memory_leaves_no_text_in_the_pages_that_quoted_it(quoted, client_a, delete, run_tasks):
    page = Profile.objects.get(sources__item_id=quoted.pk)

    delete(client_a, quoted)

    assert residue(NOTEBOOK) == {}
    assert not SemanticMemory.objects.filter(pk=quoted.pk).exists()
    assert not Mention.objects.filter(item_id=quoted.pk).exists()
    # The page is recompiled from what is left, its other revisions kept.
    run_tasks("compile_profile", "lint_profiles")
    page.refresh_from_db()
    assert page.markdown and NOTEBOOK not in page.markdown
    assert residue(NOTEBOOK) == {}


def test_a_memory_delete_waits_for_the_owners_work_then_answers_409(quoted, api, client_a, settings):
    """A compile of Caroline's page holds her work locks between reading the memory and storing the
    page: the delete does not go ahead of it (the page would quote a deleted memory), it waits at most
    DELETE_WAIT_SECONDS and answers 409."""
    settings.DELETE_WAIT_SECONDS = 0
    keys = work_lock_keys(WorkOf(organization_id=client_a.organization_id, end_user_ids=(quoted.end_user_id,)))
    held, release = threading.Event(), threading.Event()

    def compile_running():
        try:
            with advisory_lock(
                OWNER_LOCKS.key(organization_id=client_a.organization_id, end_user_id=quoted.end_user_id)
            ):
                held.set()
                release.wait(20)
        finally:
            connection.close()

    assert OWNER_LOCKS.key(organization_id=client_a.organization_id, end_user_id=quoted.end_user_id) in keys
    worker = threading.Thread(target=compile_running)
    worker.start()
    try:
        assert held.wait(10)
        response = api.delete(f"/api/v1/memory/semantic/{quoted.pk}")
        assert response.status_code == 409, response.content
        assert "try again" in response.json()["error"]["message"]
        assert SemanticMemory.objects.filter(pk=quoted.pk).exists()
    finally:
        release.set()
        worker.join(30)
    assert api.delete(f"/api/v1/memory/semantic/{quoted.pk}").status_code == 204
