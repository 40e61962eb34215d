"""A verdict on a skill names a real session of its user that the caller reads (issue 39): an
unknown session or user, or another scope's session, is refused naming `session_id`, over REST and
MCP alike, and no end user is created for a user_id nobody added."""

import pytest

from apps.skills.models import SkillFeedback
from apps.tenancy.models import EndUser
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.mcp_server.test_tool_rules import call_tool
from tests.skills.factories import SkillFactory, task_session

pytestmark = pytest.mark.django_db

TURNS = [{"role": "user", "content": "Change my flight to Friday."}, {"role": "assistant", "content": "Done."}]


@pytest.fixture
def skill(client_a):
    return SkillFactory(organization=client_a.organization, name="change-flight")


def verdict(**overrides) -> dict:
    return {"user_id": "alice", "session_id": "trip-1", "verdict": "hurt", "reason": "It skipped a step.", **overrides}


def test_feedback_for_a_session_that_does_not_exist_is_refused_naming_it(client_a, skill):
    url = f"/api/v1/skills/{skill.pk}/feedback"
    task_session(client_a, messages=TURNS, session_id="trip-1", user_id="alice", outcome="failure")
    other_scope = ClientFactory(organization=client_a.organization, name="other-desk", write_scope="other")
    task_session(other_scope, messages=TURNS, session_id="trip-9", user_id="alice", outcome="failure")

    for body in (
        verdict(user_id="ghost"),  # a user nobody added
        verdict(session_id="trip-2"),  # alice's, but no such session
        verdict(session_id="trip-9"),  # alice's, in a scope the client does not read
    ):
        response = api_for(client_a).post(url, body, format="json")
        assert response.status_code == 400, response.content
        assert "session_id" in response.json()["error"]["details"], response.content
        status, text = call_tool(client_a, "skill_feedback", {"skill_id": str(skill.pk), **body})
        assert status == 400 and "session_id" in text, text

    assert not SkillFeedback.objects.exists()
    assert not EndUser.objects.filter(user_id="ghost").exists()
    response = api_for(client_a).post(url, verdict(), format="json")
    assert response.status_code == 201, response.content
    assert SkillFeedback.objects.get().end_user.user_id == "alice"


def test_feedback_may_name_a_session_of_a_scope_the_client_reads(client_a, skill):
    # An agent that reads the skill's scope from its own write scope judges it for its own session.
    reader = ClientFactory(
        organization=client_a.organization, name="reader", write_scope="desk", read_scopes=["default", "desk"]
    )
    task_session(reader, messages=TURNS, session_id="trip-5", user_id="bob", outcome="success")

    response = api_for(reader).post(
        f"/api/v1/skills/{skill.pk}/feedback", verdict(user_id="bob", session_id="trip-5"), format="json"
    )

    assert response.status_code == 201, response.content
    feedback = SkillFeedback.objects.get()
    assert (feedback.session_id, feedback.end_user.user_id, feedback.client_id) == ("trip-5", "bob", reader.pk)
