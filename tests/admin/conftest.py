import pytest

from tests.admin.makers import staff_user
from tests.factories import ClientFactory, OrganizationFactory


@pytest.fixture
def org_b(db):
    return OrganizationFactory(name="org-b")


@pytest.fixture
def client_b(org_b):
    return ClientFactory(organization=org_b, name="agent-b")


@pytest.fixture
def curator(organization):
    """A staff person attached to organisation A, with the permissions a curator is given."""
    return staff_user(organization)


@pytest.fixture
def curator_client(client, curator):
    client.force_login(curator)
    return client
