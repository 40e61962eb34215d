"""The authorize page's own checks, in process: a tampered form names what was wrong, never a 500."""

import pytest
from django.contrib.auth import get_user_model

from apps.oauth.models import ApplicationBinding

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
