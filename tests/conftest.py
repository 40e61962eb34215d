from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright
from rest_framework.test import APIClient

from tests.factories import ClientFactory, OrganizationFactory

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def chromium(monkeypatch):
    """Debian's Chromium driven by Playwright (which never downloads a browser of its own)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing. The browser tests drive Debian's Chromium, never a downloaded build: "
            "install it with `sudo apt-get install chromium` (`make test` does this when run as root)."
        )
    # Playwright's sync API keeps an event loop registered on this thread while it runs; Django's
    # async-safety check would then refuse the test's own (synchronous) ORM calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
        # Django keeps connections in context variables, and Playwright runs this code with its own
        # context: the connection the test used is invisible to pytest-django's teardown, and
        # would keep the test database from being dropped.
        connections.close_all()


@pytest.fixture(autouse=True)
def no_counts_per_address():
    """Every request of the suite comes from 127.0.0.1: a test starts with none of the others' counts per
    address (apps.core.throttling; counts per client are a fresh client's in each test)."""
    import redis
    from django.conf import settings

    from apps.core.redis_clients import redis_client
    from apps.core.throttling import ADDRESS_KEY_PREFIX

    connection = redis_client(settings.RATE_LIMIT_REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        keys = list(connection.scan_iter(match=f"{ADDRESS_KEY_PREFIX}*", count=1000))
        if keys:
            connection.delete(*keys)
    except redis.RedisError:
        pass  # the tests that need Redis say so themselves
    finally:
        connection.close()


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path):
    """Archives written by export requests go to the test's own directory."""
    settings.EXPORT_DIR = tmp_path / "exports"
    return settings.EXPORT_DIR


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
    """Ingest through the real service: add_messages(client, user_id, session_id, messages, **options)
    returns the result's fields as a dict."""
    from dataclasses import asdict

    from apps.conversations.services.ingest import messages_ingest

    def add(client, user_id="user-1", session_id="s1", messages=None, **options):
        messages = messages or [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
        return asdict(
            messages_ingest(client=client, user_id=user_id, session_id=session_id, messages=messages, **options)
        )

    return add


@pytest.fixture
def handlers():
    """Registers handlers for a test and removes them afterwards: handlers["extract_memories"] = fn."""
    from apps.pipeline.registry import HANDLERS

    saved = dict(HANDLERS)
    yield HANDLERS
    HANDLERS.clear()
    HANDLERS.update(saved)
