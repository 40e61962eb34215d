"""The authorize page's own checks, in process: a tampered form names what was wrong, never a 500; no shortcut
of django-oauth-toolkit issues a code past the organisation check."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant

from apps.oauth.models import ApplicationBinding
from tests.admin.makers import staff_user
from tests.mcp_server.oauth import REDIRECT_URI, bound_application, pkce_pair

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("allow", [True, False])
def test_a_form_naming_an_unknown_application_is_shown_again_with_the_error(client, client_a, allow):
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    form = {
        "client_id": "no-such-application",
        "redirect_uri": "http://127.0.0.1:9/callback",
        "response_type": "code",
        "scope": "mcp",
        "platform_client": str(client_a.pk),
        **({"allow": "Approve"} if allow else {}),
    }

    response = client.post("/oauth/authorize/", form)

    assert response.status_code == 200
    assert "No OAuth application has this client_id." in response.content.decode()
    assert not ApplicationBinding.objects.exists()


def _authorize_query(application, **extra) -> dict:
    return {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "st4te",
        "code_challenge": pkce_pair()[1],
        "code_challenge_method": "S256",
        "scope": "mcp",
        **extra,
    }


@pytest.fixture
def staff_a(client, client_a):
    client.force_login(staff_user(client_a.organization))
    return client


def test_skip_authorization_of_another_organisations_application_issues_no_code(staff_a, foreign_client):
    application = bound_application(foreign_client)
    Application.objects.filter(pk=application.pk).update(skip_authorization=True)

    response = staff_a.get("/oauth/authorize/", _authorize_query(application))

    assert response.status_code == 403 and "may not approve" in response.content.decode()
    assert not Grant.objects.exists()


def test_an_earlier_token_of_another_organisations_application_is_not_reused(staff_a, client_a, foreign_client):
    """approval_prompt=auto reuses a staff member's earlier token: not for an application of another organisation."""
    application = bound_application(foreign_client)
    staff = get_user_model().objects.get(username__startswith="curator")
    AccessToken.objects.create(
        user=staff, application=application, scope="mcp", expires=timezone.now() + timedelta(hours=1), token="t"
    )

    response = staff_a.get("/oauth/authorize/", _authorize_query(application, approval_prompt="auto"))

    assert response.status_code == 403
    assert not Grant.objects.exists()


def test_approval_prompt_from_the_url_is_ignored(staff_a, client_a):
    """Even for the staff member's own application and an earlier token of theirs: the page is shown."""
    application = bound_application(client_a)
    staff = get_user_model().objects.get(username__startswith="curator")
    AccessToken.objects.create(
        user=staff, application=application, scope="mcp", expires=timezone.now() + timedelta(hours=1), token="t"
    )

    response = staff_a.get("/oauth/authorize/", _authorize_query(application, approval_prompt="auto"))

    assert response.status_code == 200 and 'name="allow"' in response.content.decode()
    assert not Grant.objects.exists()


def test_skip_authorization_needs_a_binding_the_staff_member_may_approve(staff_a, client_a):
    """Bound to their organisation's client: the shortcut issues a code. Not bound yet: the page is shown."""
    own = bound_application(client_a)
    unbound = Application.objects.create(
        name="Unbound host",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
        skip_authorization=True,
    )
    Application.objects.filter(pk=own.pk).update(skip_authorization=True)

    shown = staff_a.get("/oauth/authorize/", _authorize_query(unbound))
    assert shown.status_code == 200 and 'name="platform_client"' in shown.content.decode()
    assert not Grant.objects.exists()

    skipped = staff_a.get("/oauth/authorize/", _authorize_query(own))
    assert skipped.status_code == 302 and skipped["Location"].startswith(f"{REDIRECT_URI}?code=")
    assert Grant.objects.get().application == own
