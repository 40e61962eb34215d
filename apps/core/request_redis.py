"""The Redis requests ask on their way in (RATE_LIMIT_REDIS_URL, rate-limit counts): short timeouts, and
after a failure not asked for RATE_LIMIT_RETRY_SECONDS, so an outage costs one timeout per interval."""

import logging
import time
from collections.abc import Callable
from functools import lru_cache

import redis
from django.conf import settings

from apps.core.redis_clients import redis_client

logger = logging.getLogger(__name__)

_skip_until = 0.0


@lru_cache(maxsize=1)
def _redis() -> redis.Redis:
    return redis_client(
        settings.RATE_LIMIT_REDIS_URL,
        socket_timeout=settings.RATE_LIMIT_TIMEOUT_SECONDS,
        socket_connect_timeout=settings.RATE_LIMIT_TIMEOUT_SECONDS,
    )


def run(commands: Callable[[redis.client.Pipeline], None]) -> list | None:
    """The replies of the commands queued on one pipeline, or None when Redis did not answer now or recently."""
    global _skip_until
    if time.monotonic() < _skip_until:
        return None
    pipeline = _redis().pipeline()
    commands(pipeline)
    try:
        return pipeline.execute()
    except redis.RedisError as exc:
        _skip_until = time.monotonic() + settings.RATE_LIMIT_RETRY_SECONDS
        logger.warning(
            "rate limits are not enforced for %g s: Redis is unreachable (%s)",
            settings.RATE_LIMIT_RETRY_SECONDS,
            exc,
        )
        return None


def reset() -> None:
    """Forgets the connection and any recent failure (tests whose settings name another Redis)."""
    global _skip_until
    _redis.cache_clear()
    _skip_until = 0.0
