"""Every endpoint that takes an id answers a foreign id exactly like a missing one.

To add an endpoint, add one line to ENDPOINTS: (method, a function that creates an object
owned by the given client and returns the URL that addresses it, and the same URL with a
random id).
"""

import uuid

import pytest

from apps.conversations.models import Message
from apps.pipeline.services import enqueue
from tests.conftest import api_for


def _session_url(client, add_messages, suffix=""):
    add_messages(client, user_id="owner", session_id="sess-x")
    return f"/api/v1/sessions/sess-x/{suffix}?user_id=owner", f"/api/v1/sessions/sess-{uuid.uuid4().hex[:8]}/{suffix}?user_id=owner"


def _message_url(client, add_messages):
    add_messages(client, user_id="owner", session_id="sess-m")
    message = Message.objects.filter(session__organization=client.organization, session__session_id="sess-m").first()
    return f"/api/v1/memory/message/{message.pk}", f"/api/v1/memory/message/{uuid.uuid4()}"


def _task_url(client, add_messages):
    task = enqueue("embed_messages", {"session": str(uuid.uuid4()), "from_seq": 1, "to_seq": 1}, organization=client.organization)
    return f"/api/v1/tasks/{task.pk}/", f"/api/v1/tasks/{uuid.uuid4()}/"


def _skill_url(client, add_messages, template="/api/v1/skills/{}/"):
    from tests.skills.factories import SkillFactory

    skill = SkillFactory(organization=client.organization, scope=client.write_scope)
    return template.format(skill.pk), template.format(uuid.uuid4())


def _distill_url(client, add_messages):
    add_messages(client, user_id="owner", session_id="sess-d", session_tag="task", seal=True)
    return "/api/v1/sessions/sess-d/distill?user_id=owner", f"/api/v1/sessions/sess-{uuid.uuid4().hex[:8]}/distill?user_id=owner"


def _memory_url(memory_type):
    def make(client, add_messages):
        from tests.memories.makers import MAKERS

        memory = MAKERS[memory_type](client, "owner", f"{memory_type} memory of {client.name}")
        return f"/api/v1/memory/{memory_type}/{memory.pk}", f"/api/v1/memory/{memory_type}/{uuid.uuid4()}"

    return make


def _user_erasure_url(client, add_messages):
    add_messages(client, user_id="erase-me", session_id="sess-e")
    return "/api/v1/users/erase-me/memories", f"/api/v1/users/erase-{uuid.uuid4().hex[:8]}/memories"


def _client_erasure_url(client, add_messages):
    from tests.factories import ClientFactory

    target = ClientFactory(organization=client.organization)
    return f"/api/v1/clients/{target.pk}/memories", f"/api/v1/clients/{uuid.uuid4()}/memories"


def _erasure_url(client, add_messages):
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve

    add_messages(client, user_id="erased", session_id="sess-r")
    erasure = erasure_request(subject=subject_resolve(organization=client.organization, kind="user", subject_id="erased"))
    return f"/api/v1/erasures/{erasure.pk}/", f"/api/v1/erasures/{uuid.uuid4()}/"


def _profile_url(client, add_messages):
    from tests.profiles.makers import make_profile

    profile = make_profile(client, "owner", f"profile of {client.name}")
    return f"/api/v1/profiles/{profile.pk}/", f"/api/v1/profiles/{uuid.uuid4()}/"


ENDPOINTS = [
    ("get", lambda client, add: _session_url(client, add)),
    ("patch", lambda client, add: _session_url(client, add)),
    ("post", lambda client, add: _session_url(client, add, "seal")),
    ("delete", _message_url),
    ("get", _task_url),
    ("get", _skill_url),
    ("delete", _skill_url),
    ("delete", lambda client, add: _skill_url(client, add, "/api/v1/memory/procedural/{}")),
    ("post", _distill_url),
    ("delete", _memory_url("episodic")),
    ("delete", _memory_url("semantic")),
    ("delete", _user_erasure_url),
    ("delete", _client_erasure_url),
    ("get", _erasure_url),
    ("get", _profile_url),
]


@pytest.mark.django_db
@pytest.mark.parametrize("method,make", ENDPOINTS)
def test_foreign_ids_are_indistinguishable_from_missing_ones(method, make, client_a, foreign_client, add_messages):
    foreign_url, missing_url = make(foreign_client, add_messages)
    api = api_for(client_a)
    body = {"outcome": "success"} if method == "patch" else None
    foreign = getattr(api, method)(foreign_url, body, format="json")
    missing = getattr(api, method)(missing_url, body, format="json")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content

    # The same request for the caller's own object is not a 404: the test can fail.
    own_url, _ = make(client_a, add_messages)
    assert getattr(api, method)(own_url, body, format="json").status_code != 404


@pytest.mark.django_db
def test_malformed_ids_get_the_same_404(api):
    assert api.get("/api/v1/tasks/not-a-uuid/").content == api.get(f"/api/v1/tasks/{uuid.uuid4()}/").content
