"""The "distil now" action of apps/conversations/admin.py."""

import pytest

from apps.pipeline.models import MemoryTask
from tests.admin.makers import TASK_MESSAGES
from tests.skills.factories import task_session

pytestmark = pytest.mark.django_db


def test_distil_now_queues_sealed_task_sessions_of_the_own_organisation_only(curator_client, client_a, client_b):
    sealed = task_session(client_a, messages=TASK_MESSAGES, session_id="sealed")
    still_open = task_session(client_a, messages=TASK_MESSAGES, session_id="still-open", seal=False)
    theirs = task_session(client_b, messages=TASK_MESSAGES, session_id="theirs")
    MemoryTask.objects.filter(task_type="distill_session").delete()  # sealing queued them; start clean

    response = curator_client.post(
        "/admin/conversations/session/",
        {"action": "distill_now", "_selected_action": [str(s.pk) for s in (sealed, still_open, theirs)]},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert "Queued distillation of 1 session(s)." in messages
    assert any("not sealed yet" in m for m in messages)
    queued = MemoryTask.objects.filter(task_type="distill_session")
    assert [task.payload["session"] for task in queued] == [str(sealed.pk)]
