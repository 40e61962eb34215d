"""The API docs in a real browser with every request outside the live server refused: Swagger UI
and ReDoc come from the platform's own static files, so they render on an air-gapped install."""

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def offline_page(chromium, live_server):
    """A page that can reach the live server and nothing else; what it tried elsewhere is kept."""
    own_origin = urlsplit(live_server.url).netloc
    context = chromium.new_context(base_url=live_server.url)
    context.set_default_timeout(15_000)
    outside, failed = [], []

    def only_the_platform(route):
        if urlsplit(route.request.url).netloc == own_origin:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_platform)
    page = context.new_page()
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    page.outside, page.failed = outside, failed
    yield page
    context.close()


def test_swagger_ui_renders_the_operations_offline(offline_page):
    offline_page.goto("/api/docs/")

    add = offline_page.locator('.opblock-summary-path[data-path="/api/v1/memory/add"]')
    expect(add).to_be_visible()
    expect(offline_page.locator('.opblock-summary-path[data-path="/api/v1/memory/search"]').first).to_be_visible()
    add.click()  # the operation opens with its request body schema
    expect(offline_page.locator(".opblock.is-open")).to_contain_text("messages")
    assert offline_page.outside == [] and offline_page.failed == []


def test_redoc_renders_offline(offline_page):
    offline_page.goto("/api/redoc/")

    # ReDoc renders the whole schema in the page's own JavaScript: seconds on a busy CPU.
    expect(offline_page.locator("h1").first).to_contain_text("Memory Platform API", timeout=30_000)
    expect(offline_page.get_by_text("/api/v1/memory/add").first).to_be_attached()
    assert offline_page.outside == [] and offline_page.failed == []
