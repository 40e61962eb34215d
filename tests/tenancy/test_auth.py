import pytest
from django.db import connection

from apps.tenancy.models import ClientAPIKey
from apps.tenancy.services import api_key_revoke, client_set_status
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


def test_the_database_never_holds_a_key_in_clear(client_a):
    secret = client_a.raw_key.split("_", 2)[2]
    with connection.cursor() as cursor:
        cursor.execute("SELECT prefix, hashed_key FROM tenancy_clientapikey")
        rows = cursor.fetchall()
    assert rows
    for prefix, hashed_key in rows:
        assert secret not in prefix and secret not in hashed_key
        assert client_a.raw_key not in hashed_key


def test_both_headers_authenticate(client_a):
    response = api_for(client_a).get("/api/v1/me")
    assert response.status_code == 200
    assert response.json()["name"] == "agent-a"
    from rest_framework.test import APIClient

    api = APIClient()
    response = api.get("/api/v1/me", HTTP_X_API_KEY=client_a.raw_key)
    assert response.status_code == 200
    assert response.json()["write_scope"] == "default"


@pytest.mark.parametrize(
    "header",
    [None, "Api-Key mp_nothere1_abc", "Api-Key garbage", "Bearer something", "Api-Key "],
)
def test_missing_or_wrong_keys_get_401_with_json(client_a, header):
    from rest_framework.test import APIClient

    api = APIClient()
    if header is not None:
        api.credentials(HTTP_AUTHORIZATION=header)
    response = api.get("/api/v1/me")
    assert response.status_code == 401
    body = response.json()
    assert body["error"]["status"] == 401
    assert body["error"]["message"]
    assert response["WWW-Authenticate"] == "Api-Key"


def test_a_key_with_the_right_prefix_but_wrong_secret_is_refused(client_a):
    prefix = client_a.raw_key.split("_")[1]
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key mp_{prefix}_{'x' * 43}")
    assert api.get("/api/v1/me").status_code == 401


def test_revoked_key_gets_401(client_a):
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200
    api_key_revoke(prefix=client_a.raw_key.split("_")[1])
    response = api.get("/api/v1/me")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_disabled_client_gets_401(client_a):
    client_set_status(client=client_a, status="disabled")
    response = api_for(client_a).get("/api/v1/me")
    assert response.status_code == 401
    assert "disabled" in response.json()["error"]["message"]


def test_last_used_at_is_recorded(client_a):
    assert ClientAPIKey.objects.get(client=client_a).last_used_at is None
    api_for(client_a).get("/api/v1/me")
    assert ClientAPIKey.objects.get(client=client_a).last_used_at is not None


def test_read_only_client_is_refused_writes_with_403(organization):
    reader = ClientFactory(organization=organization, write_scope=None, read_scopes=["default"])
    response = api_for(reader).post(
        "/api/v1/memory/add", {"user_id": "u", "messages": [{"role": "user", "content": "hi"}]}, format="json"
    )
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]["message"]
