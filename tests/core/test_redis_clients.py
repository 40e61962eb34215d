"""Redis URLs naming Sentinels (apps.core.redis_clients): parsed as Celery reads them, refused at
start without REDIS_SENTINEL_MASTER, and followed across a failover by the rate-limit connection
(apps.core.request_redis) and the /readyz broker check, against real Sentinels."""

import pytest

from apps.core import request_redis
from apps.core.redis_clients import redis_address, redis_client, sentinel_addresses
from harness.processes import SentinelGroup, wait_for
from memory_platform.checks import sentinel_problems


def test_a_sentinel_url_names_each_sentinel_and_the_primary_database_and_password():
    addresses, options = sentinel_addresses("sentinel://:p%40ss@s1:26380/3;sentinel://s2/3;sentinel://s3:26381/3")
    assert addresses == [("s1", 26380), ("s2", 26379), ("s3", 26381)]
    assert options == {"db": 3, "password": "p@ss"}
    assert sentinel_addresses("sentinel://s1:26379")[1] == {"db": 0}
    with pytest.raises(ValueError, match="not a Sentinel address"):
        sentinel_addresses("sentinel://s1:26379;redis://s2:6379/0")


def test_a_sentinel_url_without_the_primary_name_is_refused_at_start(settings):
    settings.RATE_LIMIT_REDIS_URL = "sentinel://s1:26379/0"
    settings.REDIS_SENTINEL_MASTER = ""
    assert sentinel_problems() == [
        "RATE_LIMIT_REDIS_URL names Redis Sentinels; set REDIS_SENTINEL_MASTER to the name of the primary they watch."
    ]
    settings.REDIS_SENTINEL_MASTER = "platform"
    assert sentinel_problems() == []
    settings.RATE_LIMIT_REDIS_URL = "sentinel://s1:port/0"
    assert "RATE_LIMIT_REDIS_URL: " in sentinel_problems()[0]


def test_redis_address_never_shows_a_password(settings):
    settings.REDIS_SENTINEL_MASTER = "platform"
    assert redis_address("redis://:secret@cache:6379/0") == "cache:6379/0"
    assert redis_address("sentinel://:secret@s1:26379/0;sentinel://s2:26379/0") == (
        "Sentinels s1:26379, s2:26379 (primary 'platform')"
    )


@pytest.fixture
def sentinels(tmp_path):
    group = SentinelGroup(tmp_path).start()
    try:
        yield group
    finally:
        group.stop()


def _incr(pipeline) -> None:
    pipeline.incr("failover-probe")


@pytest.mark.django_db
def test_rate_limits_and_readiness_follow_a_failover(sentinels, settings, client):
    settings.REDIS_SENTINEL_MASTER = sentinels.master_name
    settings.RATE_LIMIT_REDIS_URL = settings.CELERY_BROKER_URL = sentinels.url
    settings.RATE_LIMIT_RETRY_SECONDS = 0.2
    request_redis.reset()
    try:
        assert request_redis.run(_incr) == [1]
        assert client.get("/readyz").json()["checks"]["redis"] == "ok"
        first = sentinels.kill_primary()

        # Counting stops while there is no primary, then goes on against the promoted replica.
        promoted = wait_for(
            lambda: (port := sentinels.primary_port()) != first and port, timeout=30, message="a promotion"
        )
        replies = wait_for(lambda: request_redis.run(_incr), timeout=10, interval=0.3, message="counting again")
        assert replies[0] in (1, 2), replies  # 2 when the first count had reached the replica
        new_primary = redis_client(f"redis://127.0.0.1:{promoted}/0", socket_timeout=1, socket_connect_timeout=1).get(
            "failover-probe"
        )
        assert int(new_primary) == replies[0]
        assert client.get("/readyz").json()["checks"]["redis"] == "ok"
    finally:
        request_redis.reset()
