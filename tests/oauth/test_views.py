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


def _register(client, **metadata):
    body = {"client_name": "Host", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
    return client.post("/oauth/register/", {**body, **metadata}, content_type="application/json")


@pytest.mark.parametrize(
    ("metadata", "description"),
    [
        ({"redirect_uris": ["http://attacker.example/cb"]}, "http redirect URIs must be loopback"),
        ({"grant_types": ["password"]}, "grant_types may only be"),
        ({"grant_types": ["client_credentials"]}, "grant_types may only be"),
        ({"redirect_uris": [f"http://127.0.0.1:{port}/cb" for port in range(1000, 1011)]}, "at most 10 URIs"),
    ],
)
def test_registration_management_refuses_what_registration_refuses(client, metadata, description):
    """RFC 7592 PUT with a valid registration token: the same checks as registering, the row unchanged."""
    registered = _register(client).json()
    body = {"client_name": "Host", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", **metadata}

    response = client.put(
        f"/oauth/register/{registered['client_id']}/",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {registered['registration_access_token']}"},
    )

    assert response.status_code == 400 and description in response.json()["error_description"]
    assert _register(client, **metadata).status_code == 400  # the same answer as registering
    application = Application.objects.get(client_id=registered["client_id"])
    assert (application.redirect_uris, application.authorization_grant_type) == (REDIRECT_URI, "authorization-code")


def test_registration_management_still_changes_what_registration_allows(client):
    registered = _register(client).json()
    response = client.put(
        f"/oauth/register/{registered['client_id']}/",
        {"client_name": "Renamed", "redirect_uris": ["https://host.example/cb"], "token_endpoint_auth_method": "none"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {registered['registration_access_token']}"},
    )
    assert response.status_code == 200, response.content
    assert Application.objects.get(client_id=registered["client_id"]).redirect_uris == "https://host.example/cb"


def test_a_registration_token_expires(client, settings):
    registered = _register(client).json()
    token = AccessToken.objects.get(application__client_id=registered["client_id"])
    lifetime = (token.expires - timezone.now()).total_seconds()
    assert settings.OAUTH_REGISTRATION_TOKEN_SECONDS - 60 < lifetime <= settings.OAUTH_REGISTRATION_TOKEN_SECONDS

    AccessToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    response = client.get(
        f"/oauth/register/{registered['client_id']}/",
        headers={"Authorization": f"Bearer {registered['registration_access_token']}"},
    )
    assert response.status_code == 401


def test_registration_is_rate_limited_per_address(client, settings):
    settings.OAUTH_REGISTRATIONS_PER_MINUTE = 3
    statuses = [_register(client).status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    refused = _register(client)
    assert refused.json()["error"] == "rate_limited" and 1 <= int(refused["Retry-After"]) <= 60
    assert Application.objects.count() == 3


@pytest.mark.parametrize(
    ("grant_type", "client_type", "extra"),
    [
        ("password", Application.CLIENT_PUBLIC, {"username": "curator", "password": "curate-with-care"}),
        ("client-credentials", Application.CLIENT_CONFIDENTIAL, {}),
    ],
)
def test_the_token_endpoint_honours_only_the_authorization_code_grants(
    client, client_a, grant_type, client_type, extra
):
    """Whatever the row says: a right staff password gets no token (no oracle), nor do a client's credentials."""
    staff_user(client_a.organization)
    application = Application(
        name="Stored with another grant",
        client_type=client_type,
        authorization_grant_type=grant_type,
        redirect_uris=REDIRECT_URI,
    )
    secret = application.client_secret
    application.save()

    response = client.post(
        "/oauth/token/",
        {"grant_type": grant_type.replace("-", "_"), "client_id": application.client_id, "scope": "mcp", **extra},
        **({"HTTP_AUTHORIZATION": _basic(application.client_id, secret)} if client_type == "confidential" else {}),
    )

    assert response.status_code == 400 and response.json()["error"] == "unsupported_grant_type"
    assert not AccessToken.objects.exists()


def _basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_token_endpoint_is_rate_limited_per_address(client, settings):
    settings.CREDENTIAL_REQUESTS_PER_MINUTE = 2
    statuses = [client.post("/oauth/token/", {"grant_type": "authorization_code"}).status_code for _ in range(3)]
    assert statuses[:2] == [400, 400] and statuses[2] == 429


def test_admin_login_is_rate_limited_per_address(client, client_a, settings):
    settings.CREDENTIAL_REQUESTS_PER_MINUTE = 2
    staff_user(client_a.organization)
    form = {"username": "someone", "password": "wrong"}
    statuses = [client.post("/admin/login/", {**form, "username": f"u{i}"}).status_code for i in range(3)]
    assert statuses == [200, 200, 429]
    # The page itself stays readable; the right password is refused too while over the limit.
    assert client.get("/admin/login/").status_code == 200
    assert client.post("/admin/login/", {"username": "curator", "password": "curate-with-care"}).status_code == 429
