import pytest
from rest_framework.test import APIClient

from tests.factories import ClientFactory, OrganizationFactory


@pytest.fixture
def organization(db):
    return OrganizationFactory()


@pytest.fixture
def client_a(organization):
    """A read-write client of organisation A, writing and reading scope `default`."""
    return ClientFactory(organization=organization, name="agent-a")


@pytest.fixture
def foreign_client(db):
    """A read-write client of another organisation, same scope name."""
    return ClientFactory(name="agent-b")


def api_for(client) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {client.raw_key}")
    return api


@pytest.fixture
def api(client_a):
    return api_for(client_a)


@pytest.fixture
def add_messages():
    """Ingest through the real service: add_messages(client, user_id, session_id, messages, **options)."""
    from django.utils import timezone

    from apps.conversations.services import messages_add
    from apps.conversations.turns import normalise_messages

    def add(client, user_id="user-1", session_id="s1", messages=None, **options):
        messages = messages or [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
        turns = normalise_messages(messages, max_chars=32000, default_occurred_at=timezone.now())
        return messages_add(client=client, user_id=user_id, session_id=session_id, turns=turns, **options)

    return add


@pytest.fixture
def handlers():
    """Registers handlers for a test and removes them afterwards: handlers["extract_memories"] = fn."""
    from apps.pipeline.registry import HANDLERS

    saved = dict(HANDLERS)
    yield HANDLERS
    HANDLERS.clear()
    HANDLERS.update(saved)
