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
