"""API rate limits: 429 with Retry-After and the limit named, per client and per organisation, shared by every
process."""

import pytest
from django.test import override_settings

from apps.core import request_redis
from tests.conftest import api_for
from tests.factories import ClientFactory


@pytest.fixture
def fresh_redis_connection():
    """Each test's settings decide which Redis the limit is counted in."""
    request_redis.reset()
    yield
    request_redis.reset()


pytestmark = pytest.mark.usefixtures("fresh_redis_connection")


def test_a_client_over_its_own_limit_gets_429_with_retry_after_and_the_limit(db):
    client = ClientFactory(requests_per_minute=3)
    api = api_for(client)

    statuses = [api.get("/api/v1/me").status_code for _ in range(3)]
    refused = api.get("/api/v1/me")

    assert statuses == [200, 200, 200]
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    assert "3 requests per minute" in error["message"]
    assert error["details"] == {"limit": "3/minute", "retry_after_seconds": int(refused["Retry-After"])}


def test_the_limit_counts_per_client(db):
    greedy, other = ClientFactory(requests_per_minute=1), ClientFactory(requests_per_minute=1)
    api_for(greedy).get("/api/v1/me")

    assert api_for(greedy).get("/api/v1/me").status_code == 429
    assert api_for(other).get("/api/v1/me").status_code == 200


def test_writes_are_refused_before_they_store_anything(db):
    client = ClientFactory(requests_per_minute=1)
    api = api_for(client)
    body = {"user_id": "u1", "session_id": "s1", "messages": [{"role": "user", "content": "hello"}]}

    assert api.post("/api/v1/memory/add", body, format="json").status_code == 202
    refused = api.post("/api/v1/memory/add", dict(body, session_id="s2"), format="json")

    assert refused.status_code == 429
    assert list(client.sessions.values_list("session_id", flat=True)) == ["s1"]


@override_settings(API_REQUESTS_PER_MINUTE=2)
def test_a_client_without_a_limit_of_its_own_has_the_default(db):
    api = api_for(ClientFactory())

    assert [api.get("/api/v1/me").status_code for _ in range(3)] == [200, 200, 429]


@override_settings(API_REQUESTS_PER_MINUTE=1)
def test_zero_means_no_limit(db):
    api = api_for(ClientFactory(requests_per_minute=0))

    assert {api.get("/api/v1/me").status_code for _ in range(5)} == {200}


def test_unauthenticated_requests_are_answered_401_not_counted(db):
    from rest_framework.test import APIClient

    response = APIClient().get("/api/v1/me")

    assert response.status_code == 401


@override_settings(RATE_LIMIT_REDIS_URL="redis://127.0.0.1:1/0", RATE_LIMIT_RETRY_SECONDS=60)
def test_an_unreachable_redis_lets_requests_through_and_is_not_asked_again_at_once(db, caplog):
    api = api_for(ClientFactory(requests_per_minute=1))

    statuses = [api.get("/api/v1/me").status_code for _ in range(3)]

    assert statuses == [200, 200, 200]
    warnings = [record for record in caplog.records if record.name == "apps.core.request_redis"]
    assert len(warnings) == 1
    assert "rate limits are not enforced" in warnings[0].getMessage()


@override_settings(API_REQUESTS_PER_MINUTE=100, ORGANIZATION_REQUESTS_PER_MINUTE=3)
def test_an_organisation_gets_its_limit_however_many_clients_it_has(db, organization):
    first, second = ClientFactory(organization=organization), ClientFactory(organization=organization)
    outsider = ClientFactory()

    statuses = [api_for(client).get("/api/v1/me").status_code for client in (first, second, first, second)]

    assert statuses == [200, 200, 200, 429]
    error = api_for(first).get("/api/v1/me").json()["error"]
    assert error["code"] == "rate_limited" and "this client's organisation may make 3 requests" in error["message"]
    assert api_for(outsider).get("/api/v1/me").status_code == 200


@override_settings(ORGANIZATION_REQUESTS_PER_MINUTE=3)
def test_a_client_over_its_own_limit_does_not_spend_its_organisations(db, organization):
    greedy = ClientFactory(organization=organization, requests_per_minute=1)
    sibling = ClientFactory(organization=organization)

    assert [api_for(greedy).get("/api/v1/me").status_code for _ in range(5)] == [200, 429, 429, 429, 429]
    assert [api_for(sibling).get("/api/v1/me").status_code for _ in range(3)] == [200, 200, 429]
