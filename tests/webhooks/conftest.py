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


@pytest.fixture
def allow_loopback(settings):
    """Deliveries may reach the receivers these tests start on 127.0.0.1: the allow-list an operator of a
    single-tenant deployment would set (by default loopback is refused, tests/webhooks/test_egress.py)."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return settings
