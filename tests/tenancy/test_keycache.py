"""Authenticated keys cached per process: a repeated request reads no key from the database, and
any change to what a key may do takes effect on the next request, in this process and in others."""

import http.client

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from apps.core import request_redis
from apps.tenancy import keycache
from apps.tenancy.models import ClientAPIKey
from apps.tenancy.services import api_key_revoke, client_revoke_keys
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.pipeline.processes import web_on_private_redis


@pytest.fixture(autouse=True)
def fresh_cache():
    request_redis.reset()
    keycache.clear()
    yield
    request_redis.reset()
    keycache.clear()


def _key_reads(queries) -> list[str]:
    return [query["sql"] for query in queries if "tenancy_clientapikey" in query["sql"]]


def test_a_repeated_request_reads_no_key_from_the_database(db, client_a):
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200

    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/me").status_code == 200

    assert _key_reads(queries.captured_queries) == []


@override_settings(API_KEY_CACHE_SECONDS=0)
def test_without_the_cache_every_request_reads_the_key(db, client_a):
    api = api_for(client_a)
    api.get("/api/v1/me")

    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/me").status_code == 200

    assert len(_key_reads(queries.captured_queries)) == 1


def test_a_revoked_key_is_refused_on_its_next_request(db, client_a):
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200

    api_key_revoke(prefix=client_a.api_keys.get().prefix)

    assert api.get("/api/v1/me").status_code == 401


def test_keys_revoked_in_bulk_are_refused_on_their_next_request(db, client_a):
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200

    client_revoke_keys(client=client_a)  # a queryset update: no model signal

    assert api.get("/api/v1/me").status_code == 401


def test_a_client_disabled_or_given_other_scopes_is_seen_on_the_next_request(db, client_a):
    api = api_for(client_a)
    assert api.get("/api/v1/me").json()["read_scopes"] == ["default"]

    client_a.read_scopes = ["default", "shared"]
    client_a.save()  # as the admin's change form saves it
    assert api.get("/api/v1/me").json()["read_scopes"] == ["default", "shared"]

    client_a.status = "disabled"
    client_a.save()
    assert api.get("/api/v1/me").status_code == 401


def test_a_wrong_secret_with_a_cached_prefix_is_refused(db, client_a):
    assert api_for(client_a).get("/api/v1/me").status_code == 200
    client_a.raw_key = client_a.raw_key[:-4] + "zzzz"

    assert api_for(client_a).get("/api/v1/me").status_code == 401


@override_settings(RATE_LIMIT_REDIS_URL="redis://127.0.0.1:1/0", RATE_LIMIT_RETRY_SECONDS=60)
def test_with_redis_unreachable_nothing_is_cached_and_revocation_is_immediate(db, client_a):
    request_redis.reset()  # the fixtures' writes connected to the suite's Redis
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200

    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/me").status_code == 200
    assert len(_key_reads(queries.captured_queries)) == 1

    api_key_revoke(prefix=client_a.api_keys.get().prefix)
    assert api.get("/api/v1/me").status_code == 401


def _status(server, raw_key: str) -> int:
    connection_ = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection_.request("GET", "/api/v1/me", headers={"Authorization": f"Api-Key {raw_key}"})
        return connection_.getresponse().status
    finally:
        connection_.close()


def test_gunicorn_workers_that_served_a_key_refuse_it_once_it_is_revoked_here(transactional_db, tmp_path):
    """Two web processes serve the key from their caches (a revocation that goes around the services
    is not seen: proof that they do not read the database), then a revocation made in this process
    reaches both through Redis."""
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0"}
    with web_on_private_redis(tmp_path / "web.log", workers=2, env=env) as (server, redis_server):
        client = ClientFactory()
        assert {_status(server, client.raw_key) for _ in range(20)} == {200}  # both workers have the key

        ClientAPIKey.objects.filter(client=client).update(revoked_at="2026-01-01T00:00:00Z")  # no signal
        assert {_status(server, client.raw_key) for _ in range(20)} == {200}

        with override_settings(RATE_LIMIT_REDIS_URL=redis_server.url):
            request_redis.reset()
            client_revoke_keys(client=client)
        assert {_status(server, client.raw_key) for _ in range(20)} == {401}


def test_a_redis_that_restarted_empty_drops_every_cached_key(transactional_db, tmp_path):
    """A revocation made while Redis was down reaches no process; the empty Redis that comes back
    gets a new generation, so no process serves a key it cached before the restart."""
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0", "RATE_LIMIT_RETRY_SECONDS": "0.1"}
    with web_on_private_redis(tmp_path / "web.log", workers=1, env=env) as (server, redis_server):
        client = ClientFactory()
        assert {_status(server, client.raw_key) for _ in range(5)} == {200}

        redis_server.stop()
        with override_settings(RATE_LIMIT_REDIS_URL=redis_server.url):
            request_redis.reset()
            client_revoke_keys(client=client)  # the new generation cannot be written
        redis_server.start()

        assert {_status(server, client.raw_key) for _ in range(5)} == {401}
