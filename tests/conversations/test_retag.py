"""PATCH sessions/<id>/ with `session_tag`: re-tagging until anything has been learned from the
session, the routing following the new tag (apps.conversations.services.session_retag)."""

import threading

import pytest
from django.db import connection

from apps.conversations.models import Message, Session
from apps.conversations.routing import DISTILL_SESSION, EXTRACT_MEMORIES, PROJECT_ENTITIES
from apps.pipeline.locks import WorkOf, advisory_lock, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.skills.models import SkillExperience
from tests.memories.makers import semantic
from tests.profiles.conftest import conversation, pages, rules, run_tasks  # noqa: F401  (shared fixtures)
from tests.skills.makers import make_experience

pytestmark = pytest.mark.django_db

CHAT = [{"role": "user", "content": "I booked the flight to Lisbon."}, {"role": "assistant", "content": "Done."}]


def retag(api, tag, session_id="s1", **extra):
    return api.patch(f"/api/v1/sessions/{session_id}/?user_id=u1", {"session_tag": tag, **extra}, format="json")


def experience_of(client, session):
    experience = make_experience(client, "u1", "a lesson")
    SkillExperience.objects.filter(pk=experience.pk).update(session=session)


def queued(task_type) -> int:
    return MemoryTask.objects.filter(task_type=task_type, status="queued").count()


def test_a_forgotten_task_tag_is_fixed_and_the_sealed_session_distilled(api, client_a, add_messages, rules, run_tasks):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT, seal=True)
    assert (queued(EXTRACT_MEMORIES), queued(PROJECT_ENTITIES), queued(DISTILL_SESSION)) == (1, 1, 0)

    response = retag(api, "task", outcome="success")

    assert response.status_code == 200, response.content
    assert (response.json()["session_tag"], response.json()["outcome"]) == ("task", "success")
    # The conversation work not yet done never runs; the sealed task session is distilled.
    assert (queued(EXTRACT_MEMORIES), queued(PROJECT_ENTITIES), queued(DISTILL_SESSION)) == (0, 0, 1)
    assert MemoryTask.objects.filter(task_type=EXTRACT_MEMORIES, status="cancelled").exists()
    run_tasks()
    session = Session.objects.get(session_id="s1")
    assert session.distilled_at is not None and session.extracted_at is None
    assert MemoryTask.objects.get(task_type=DISTILL_SESSION).status == "succeeded"


def test_an_open_session_retagged_waits_for_its_seal(api, client_a, add_messages):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    assert retag(api, "task").status_code == 200
    assert queued(DISTILL_SESSION) == 0
    assert api.post("/api/v1/sessions/s1/seal?user_id=u1").status_code == 200
    assert queued(DISTILL_SESSION) == 1


def test_a_task_session_becomes_a_conversation(api, client_a, add_messages):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT, session_tag="task", seal=True)
    assert queued(DISTILL_SESSION) == 1

    assert retag(api, "conversation").json()["session_tag"] == "conversation"

    assert (queued(EXTRACT_MEMORIES), queued(PROJECT_ENTITIES), queued(DISTILL_SESSION)) == (1, 1, 0)


def test_the_same_tag_or_an_empty_patch_changes_nothing(api, client_a, add_messages):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    before = list(MemoryTask.objects.values("id", "status"))
    assert retag(api, "conversation").status_code == 200
    assert api.patch("/api/v1/sessions/s1/?user_id=u1", {}, format="json").json()["session_tag"] == "conversation"
    assert list(MemoryTask.objects.values("id", "status")) == before


def test_once_extracted_the_tag_is_fixed(api, client_a, add_messages, rules, run_tasks):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    run_tasks(EXTRACT_MEMORIES)
    response = retag(api, "task")
    assert response.status_code == 409
    assert "its turns were extracted" in response.json()["error"]["message"]
    assert Session.objects.get(session_id="s1").session_tag == "conversation"


@pytest.mark.parametrize(
    "derive,why",
    [
        (
            lambda client, turn: semantic(
                client.organization, "default", "u1", "u1", "Flies to Lisbon.", source_message_ids=[turn.pk]
            ),
            "semantic memories were learned from it",
        ),
        (lambda client, turn: experience_of(client, turn.session), "skill experiences were distilled from it"),
    ],
    ids=["memory", "experience"],
)
def test_anything_derived_from_its_turns_fixes_the_tag(api, client_a, add_messages, derive, why):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    derive(client_a, Message.objects.first())
    tasks = list(MemoryTask.objects.values("id", "status"))

    response = retag(api, "task", outcome="failure")

    assert response.status_code == 409 and why in response.json()["error"]["message"]
    session = Session.objects.get(session_id="s1")
    assert (session.session_tag, session.outcome) == ("conversation", "unknown"), "the request is atomic"
    assert list(MemoryTask.objects.values("id", "status")) == tasks


def test_while_learning_runs_for_the_user_the_tag_waits(api, client_a, add_messages):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    session = Session.objects.get(session_id="s1")
    key = work_lock_keys(WorkOf(organization_id=session.organization_id, end_user_ids=(session.end_user_id,)))[0]
    held, release = threading.Event(), threading.Event()

    def hold():
        with advisory_lock(key):
            held.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        response = retag(api, "task")
    finally:
        release.set()
        holder.join()
    assert response.status_code == 409 and "try again" in response.json()["error"]["message"]
    assert retag(api, "task").status_code == 200


@pytest.mark.parametrize("body,field", [({"session_tag": "chat"}, "session_tag"), ({"tag": "task"}, "tag")])
def test_bad_patches_are_refused_naming_the_field(api, client_a, add_messages, body, field):
    add_messages(client_a, user_id="u1", session_id="s1", messages=CHAT)
    response = api.patch("/api/v1/sessions/s1/?user_id=u1", body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["message"]
