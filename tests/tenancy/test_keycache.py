"""Authenticated keys cached per process: a repeated request reads no key from the database, and
any change to what a key may do takes effect on the next request, in this process and in others,
whatever Redis does meanwhile."""

import http.client
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, transaction
from django.db import connections as db_connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from apps.core import request_redis
from apps.tenancy import keycache
from apps.tenancy.models import ClientAPIKey
from apps.tenancy.selectors import client_for_api_key
from apps.tenancy.services import api_key_revoke, client_revoke_keys
from harness.processes import web_on_private_redis
from tests.conftest import api_for
from tests.factories import ClientFactory


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
def test_with_redis_unreachable_keys_are_still_cached_and_revocation_is_immediate(db, client_a):
    request_redis.reset()  # the fixtures' writes connected to the suite's Redis
    api = api_for(client_a)
    assert api.get("/api/v1/me").status_code == 200

    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/me").status_code == 200
    assert _key_reads(queries.captured_queries) == []

    api_key_revoke(prefix=client_a.api_keys.get().prefix)
    assert api.get("/api/v1/me").status_code == 401


def test_a_revocation_is_seen_by_other_connections_exactly_when_it_commits(transactional_db):
    """The new generation commits with the revoked key: a reader on another connection sees the old
    generation and the valid key, or the new generation (and reads the key again), never the old
    generation with the key already revoked."""
    client = ClientFactory()
    prefix = client.raw_key.split("_")[1]

    def elsewhere(read):
        with ThreadPoolExecutor(max_workers=1) as pool:  # another thread: another database connection
            return pool.submit(_on_own_connection, read).result()

    # Authenticated once before, so the reads below need not write the key's last-used time (the
    # revocation holds the key row's lock until it commits).
    assert elsewhere(lambda: client_for_api_key(raw_key=client.raw_key)) is not None
    before = elsewhere(keycache.current_generation)
    with transaction.atomic():
        api_key_revoke(prefix=prefix)
        assert elsewhere(keycache.current_generation) == before
        assert elsewhere(lambda: client_for_api_key(raw_key=client.raw_key)) is not None
    assert elsewhere(keycache.current_generation) != before
    assert elsewhere(lambda: client_for_api_key(raw_key=client.raw_key)) is None


def test_a_save_outside_a_transaction_replaces_the_generation_after_it_commits(transactional_db):
    client = ClientFactory()
    before = keycache.current_generation()

    client.read_scopes = ["default", "shared"]
    client.save()  # autocommit: the receiver after the save replaces the generation

    assert keycache.current_generation() not in (None, before)


def _on_own_connection(read):
    try:
        return read()
    finally:
        db_connections.close_all()


def _status(server, raw_key: str) -> int:
    connection_ = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection_.request("GET", "/api/v1/me", headers={"Authorization": f"Api-Key {raw_key}"})
        return connection_.getresponse().status
    finally:
        connection_.close()


def _statuses(server, raw_key: str, *, requests: int, interval: float = 0.0) -> set[int]:
    statuses = set()
    for _ in range(requests):
        statuses.add(_status(server, raw_key))
        time.sleep(interval)
    return statuses


def _served_by_every_worker(server, raw_key: str, *, workers: int, most: int = 400) -> set[int]:
    """Statuses of requests sent until the access log shows `workers` processes answered one (the
    kernel hands a connection to whichever accepts first, so 20 requests may all reach one)."""
    statuses = set()
    for _ in range(most):
        statuses.add(_status(server, raw_key))
        if len(set(re.findall(r"^<(\d+)> GET /api/v1/me ", server.log(), re.MULTILINE))) >= workers:
            return statuses
    raise AssertionError(f"{most} requests did not reach {workers} web processes")


def test_gunicorn_workers_that_served_a_key_refuse_it_once_it_is_revoked_here(transactional_db, tmp_path):
    """Two web processes serve the key from their caches (a revocation that goes around the services
    is not seen: proof that they do not read the key), then a revocation made in this process
    reaches both."""
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0"}
    pids_in_access_log = ("--access-logformat", "%(p)s %(r)s %(s)s")
    with web_on_private_redis(tmp_path / "web.log", workers=2, env=env, extra_args=pids_in_access_log) as (
        server,
        _redis_server,
    ):
        client = ClientFactory()
        assert _served_by_every_worker(server, client.raw_key, workers=2) == {200}

        ClientAPIKey.objects.filter(client=client).update(revoked_at="2026-01-01T00:00:00Z")  # no signal
        assert _statuses(server, client.raw_key, requests=20) == {200}

        client_revoke_keys(client=client)
        assert _statuses(server, client.raw_key, requests=20) == {401}


def test_a_revocation_made_in_its_processs_redis_back_off_is_honoured_by_every_process(transactional_db, tmp_path):
    """Issue 39: the revoking process had lost Redis for a moment and does not ask it again for
    RATE_LIMIT_RETRY_SECONDS; the web processes reach Redis all along. They refuse the key at once."""
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0"}
    with web_on_private_redis(tmp_path / "web.log", workers=2, env=env) as (server, redis_server):
        client = ClientFactory()
        assert _statuses(server, client.raw_key, requests=20) == {200}

        with override_settings(
            RATE_LIMIT_REDIS_URL=redis_server.url, RATE_LIMIT_TIMEOUT_SECONDS=0.2, RATE_LIMIT_RETRY_SECONDS=600
        ):
            request_redis.reset()
            redis_server.pause()
            try:
                assert request_redis.run(lambda pipeline: pipeline.ping()) is None  # times out: back-off begins
            finally:
                redis_server.resume()
            assert request_redis.run(lambda pipeline: pipeline.ping()) is None  # still backing off

            api_key_revoke(prefix=client.raw_key.split("_")[1])

        assert _statuses(server, client.raw_key, requests=20) == {401}


def test_a_redis_restored_from_a_snapshot_older_than_the_revocation_brings_no_key_back(transactional_db, tmp_path):
    """Issue 39: Redis restarts from an RDB file written before the revocation; whatever it held then
    (an older generation, in the design this replaces) must not make the revoked key work again."""
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0", "RATE_LIMIT_RETRY_SECONDS": "0.1"}
    with web_on_private_redis(tmp_path / "web.log", workers=1, env=env, redis_dir=tmp_path) as (server, redis_server):
        client = ClientFactory()
        assert _statuses(server, client.raw_key, requests=5) == {200}
        redis_server.snapshot()

        with override_settings(RATE_LIMIT_REDIS_URL=redis_server.url):
            request_redis.reset()
            api_key_revoke(prefix=client.raw_key.split("_")[1])
        assert _statuses(server, client.raw_key, requests=5) == {401}

        redis_server.stop()
        redis_server.start()  # loads the snapshot

        # Past the worker's Redis back-off (0.1 s) after the broken connection: it reads Redis again.
        assert _statuses(server, client.raw_key, requests=20, interval=0.05) == {401}


def test_a_revocation_made_while_redis_was_down_is_honoured_when_it_returns(transactional_db, tmp_path):
    env = {"LOG_LEVEL": "ERROR", "API_REQUESTS_PER_MINUTE": "0", "RATE_LIMIT_RETRY_SECONDS": "0.1"}
    with web_on_private_redis(tmp_path / "web.log", workers=1, env=env) as (server, redis_server):
        client = ClientFactory()
        assert _statuses(server, client.raw_key, requests=5) == {200}

        redis_server.stop()
        with override_settings(RATE_LIMIT_REDIS_URL=redis_server.url):
            request_redis.reset()
            client_revoke_keys(client=client)
        assert _statuses(server, client.raw_key, requests=5) == {401}
        redis_server.start()

        assert _statuses(server, client.raw_key, requests=20, interval=0.05) == {401}
