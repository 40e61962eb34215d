"""Admin: an issued API key is shown once on the response page, never stored in a message (cookie
or session); admin logins are locked out after repeated wrong passwords."""

import re

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session as DjangoSession
from django.test import Client as BrowserClient
from django.test import override_settings

from apps.tenancy.models import Client
from apps.tenancy.selectors import client_for_api_key

pytestmark = pytest.mark.django_db

KEY = re.compile(r"mp_[a-z0-9]+_[A-Za-z0-9_-]+")


@pytest.fixture
def root(client):
    client.force_login(User.objects.create_superuser("root", password="correct horse battery"))
    return client


def _assert_key_not_stored(response, raw_key: str) -> None:
    """Neither in a cookie set by the response, nor in any session row, nor in a later page."""
    for morsel in response.cookies.values():
        assert raw_key not in morsel.value
    for session in DjangoSession.objects.all():
        assert raw_key not in str(session.get_decoded())


def test_adding_a_client_shows_its_key_on_the_answer_itself(root, organization):
    response = root.post(
        "/admin/tenancy/client/add/",
        {
            "organization": organization.pk,
            "name": "agent",
            "status": "active",
            "write_scope": "s",
            "read_scopes": "s",
            "requests_per_minute": "120",
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 200, response.content[:2000]
    raw_key = KEY.search(response.content.decode()).group(0)
    client, _ = client_for_api_key(raw_key=raw_key)
    assert client == Client.objects.get(name="agent") and client.requests_per_minute == 120
    assert "no-store" in response["Cache-Control"]
    assert "messages" not in response.cookies
    _assert_key_not_stored(response, raw_key)
    assert raw_key not in root.get("/admin/tenancy/client/").content.decode()


def test_issuing_a_new_key_shows_it_once_and_stores_it_nowhere(root, client_a):
    response = root.post("/admin/tenancy/client/", {"action": "issue_new_key", "_selected_action": [client_a.pk]})

    assert response.status_code == 200
    raw_keys = KEY.findall(response.content.decode())
    assert len(raw_keys) == 1 and raw_keys[0] != client_a.raw_key
    assert client_for_api_key(raw_key=raw_keys[0])[0] == client_a
    assert "no-store" in response["Cache-Control"]
    _assert_key_not_stored(response, raw_keys[0])
    assert raw_keys[0] not in root.get("/admin/tenancy/client/").content.decode()


@override_settings(AXES_FAILURE_LIMIT=5)
def test_the_admin_login_locks_out_after_repeated_wrong_passwords():
    User.objects.create_superuser("admin", password="correct horse battery")
    browser = BrowserClient(REMOTE_ADDR="203.0.113.9")

    wrong = [
        browser.post("/admin/login/", {"username": "admin", "password": f"guess-{n}"}).status_code for n in range(5)
    ]
    right = browser.post("/admin/login/", {"username": "admin", "password": "correct horse battery"})

    assert wrong[:4] == [200] * 4  # the login form again, with its error
    assert right.status_code == 429
    assert "_auth_user_id" not in browser.session


def test_a_right_password_before_the_limit_logs_in_and_resets_the_count():
    User.objects.create_superuser("admin", password="correct horse battery")
    browser = BrowserClient()
    for n in range(3):
        browser.post("/admin/login/", {"username": "admin", "password": f"guess-{n}"})

    response = browser.post("/admin/login/", {"username": "admin", "password": "correct horse battery"})

    assert response.status_code == 302
    assert browser.get("/admin/").status_code == 200
