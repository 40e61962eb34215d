"""The ingest service (apps.conversations.services.ingest) beyond what the API tests reach."""

import pytest
from django.db import IntegrityError

from apps.conversations.models import Session


@pytest.mark.django_db
def test_an_invalid_default_session_tag_fails_the_add_once_instead_of_recursing(client_a, add_messages, settings):
    """`manage.py check` refuses such a setting at start; a process that has it anyway must not take the
    CHECK violation for a concurrent add and retry until the stack runs out."""
    settings.DEFAULT_SESSION_TAG = "chat"
    with pytest.raises(IntegrityError, match="session_tag"):
        add_messages(client_a, user_id="alice", session_id="untagged")
    assert not Session.objects.filter(session_id="untagged").exists()


@pytest.mark.django_db
def test_work_is_claimed_in_the_order_users_wait_for_it(client_a, add_messages):
    """A conversation's turns are indexed before anything is learned from them; a task session is
    distilled before its (long, rarely searched) turns are indexed."""
    from apps.pipeline.models import MemoryTask

    Priority = MemoryTask.Priority
    add_messages(client_a, user_id="u", session_id="chat", seal=True)
    add_messages(client_a, user_id="u", session_id="job", session_tag="task", seal=True, outcome="success")

    def priority(task_type, tag):
        session = Session.objects.get(session_id=tag)
        return MemoryTask.objects.get(task_type=task_type, payload__session=str(session.pk)).priority

    assert priority("embed_messages", "chat") == Priority.URGENT
    assert priority("extract_memories", "chat") == priority("project_entities", "chat") == Priority.LEARN
    assert priority("distill_session", "job") == Priority.LEARN
    assert priority("embed_messages", "job") == Priority.COMPILE
