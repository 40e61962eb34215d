import pytest

from tests.factories import ClientFactory


@pytest.fixture
def manager(organization):
    """A client of organisation A allowed to manage webhooks (and to erase, to cause events)."""
    return ClientFactory(organization=organization, name="hooks-admin", can_manage_webhooks=True, can_erase=True)


@pytest.fixture
def fast_retries(settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.01
    settings.WEBHOOK_RETRY_MAX_SECONDS = 0.05
    return settings
