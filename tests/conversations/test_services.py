"""The ingest service (apps.conversations.services) beyond what the API tests reach."""

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
