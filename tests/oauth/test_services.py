"""apps/oauth/services.py against the real database."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from oauth2_provider.models import AccessToken, Grant

from apps.core.schedules import SCHEDULES
from apps.oauth.models import ApplicationBinding
from apps.oauth.selectors import client_for_access_token
from apps.oauth.services import application_bind, tokens_clear_expired
from apps.oauth.tasks import clear_expired_tokens
from tests.mcp_server.oauth import bound_application, minted_token

pytestmark = pytest.mark.django_db

RESOURCE = "http://127.0.0.1:8001/mcp"


def test_an_application_binds_to_one_client_only(client_a, foreign_client):
    application = bound_application(client_a)

    assert application_bind(application=application, client=client_a).client == client_a  # again: a no-op
    with pytest.raises(ValidationError, match="acts as another client"):
        application_bind(application=application, client=foreign_client)
    assert ApplicationBinding.objects.get().client == client_a


def test_a_token_resolves_to_its_client_in_one_query(client_a, django_assert_num_queries):
    token = minted_token(client_a, resource=[RESOURCE])

    with django_assert_num_queries(1):
        client = client_for_access_token(raw_token=token, resource=RESOURCE)

    assert client == client_a and client.organization.name == client_a.organization.name


def test_the_daily_job_deletes_expired_tokens_and_codes_only(client_a, django_user_model):
    live = minted_token(client_a)
    minted_token(client_a, expires_in=-60)
    application = bound_application(client_a, name="coded")
    Grant.objects.create(
        application=application,
        user=django_user_model.objects.create_user("approver"),
        code="expired-code",
        expires=timezone.now() - timedelta(minutes=5),
        redirect_uri="http://127.0.0.1:9/callback",
        scope="mcp",
        code_challenge="x" * 43,
        code_challenge_method="S256",
    )

    clear_expired_tokens()

    assert AccessToken.objects.count() == 1
    assert client_for_access_token(raw_token=live, resource=RESOURCE) == client_a
    assert not Grant.objects.exists()
    assert SCHEDULES["oauth: delete expired tokens and codes"] == ("oauth.clear_expired_tokens", 86400)


def test_the_cleanup_service_keeps_a_live_token(client_a):
    live = minted_token(client_a)

    tokens_clear_expired()

    assert client_for_access_token(raw_token=live, resource=RESOURCE) == client_a
