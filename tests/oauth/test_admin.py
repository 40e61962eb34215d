"""The OAuth pieces of the admin: bindings shown per organisation, and the Client action that
revokes a client's OAuth tokens."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from oauth2_provider.models import AccessToken, Application

from apps.oauth.models import ApplicationBinding
from apps.tenancy.models import StaffMembership
from tests.mcp_server.oauth import minted_token

pytestmark = pytest.mark.django_db


def test_the_revoke_action_deletes_the_selected_clients_tokens_and_bindings(client, client_a, foreign_client):
    minted_token(client_a)
    minted_token(foreign_client)
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))

    response = client.post(
        "/admin/tenancy/client/",
        {"action": "revoke_oauth_tokens", "_selected_action": [str(client_a.pk)]},
        follow=True,
    )

    assert "Revoked the OAuth tokens of 1 application(s)." in response.content.decode()
    assert list(ApplicationBinding.objects.values_list("client", flat=True)) == [foreign_client.pk]
    assert list(AccessToken.objects.values_list("application__platform_binding__client", flat=True)) == [
        foreign_client.pk
    ]


def test_staff_see_only_their_organisations_bindings(client, client_a, foreign_client):
    minted_token(client_a)
    minted_token(foreign_client)
    staff = get_user_model().objects.create_user("curator", password="x", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_applicationbinding"))
    StaffMembership.objects.create(user=staff, organization=client_a.organization)
    client.force_login(staff)

    response = client.get("/admin/oauth/applicationbinding/")

    assert response.status_code == 200
    assert [binding.client for binding in response.context["cl"].result_list] == [client_a]


@pytest.mark.parametrize("model", ["application", "accesstoken", "refreshtoken", "grant", "idtoken"])
def test_django_oauth_toolkits_admins_are_for_superusers_only(client, client_a, foreign_client, model):
    """Staff holding every oauth2_provider permission still see none of them: its rows are of no organisation."""
    minted_token(foreign_client)
    staff = get_user_model().objects.create_user("curator", password="x", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="oauth2_provider"))
    StaffMembership.objects.create(user=staff, organization=client_a.organization)
    client.force_login(staff)
    assert client.get(f"/admin/oauth2_provider/{model}/").status_code == 403
    application = Application.objects.get()
    assert client.get(f"/admin/oauth2_provider/application/{application.pk}/change/").status_code in (302, 403)
    assert "oauth2_provider" not in client.get("/admin/").content.decode()

    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    assert client.get(f"/admin/oauth2_provider/{model}/").status_code == 200
