"""Per-client rate limits: at most `Client.requests_per_minute` API requests a minute (empty =
API_REQUESTS_PER_MINUTE; 0 = no limit), counted in Redis so every web and MCP process shares one
count. Over the limit: 429 with `Retry-After` and a JSON error naming the limit.

A fixed one-minute window per client, counted with one atomic INCR: concurrent requests of one
burst cannot all read the same old count. Redis unreachable: requests are let through (the limit
protects the service; an outage of its counter must not take the API down with it), and Redis is
not asked again for RATE_LIMIT_RETRY_SECONDS.
"""

import time

from django.conf import settings
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

from apps.core import request_redis

WINDOW_SECONDS = 60


class RateLimited(exceptions.Throttled):
    default_code = "rate_limited"

    def __init__(self, *, limit: int, wait: float):
        super().__init__(
            wait=wait,
            detail=f"Rate limit exceeded: this client may make {limit} requests per minute.",
            code="rate_limited",
        )
        self.error_details = {"limit": f"{limit}/minute", "retry_after_seconds": self.wait}


def client_limit(client) -> int:
    """Requests per minute the client may make; 0 = no limit."""
    own = getattr(client, "requests_per_minute", None)
    return settings.API_REQUESTS_PER_MINUTE if own is None else own


def rate_limit_check(*, client) -> None:
    """Counts one request of the client; RateLimited when it is over its limit."""
    limit = client_limit(client)
    if not limit:
        return
    window = int(time.time() // WINDOW_SECONDS)
    key = f"rate-limit:{client.pk}:{window}"
    replies = request_redis.run(lambda pipeline: pipeline.incr(key).expire(key, WINDOW_SECONDS + 1))
    if replies is None:
        return
    count = replies[0]
    if count > limit:
        raise RateLimited(limit=limit, wait=max(1.0, (window + 1) * WINDOW_SECONDS - time.time()))


class ClientRateThrottle(BaseThrottle):
    """The REST API's throttle: requests of an authenticated client count against its limit."""

    def allow_request(self, request, view):
        client = request.user
        if client is not None and getattr(client, "is_authenticated", False) and hasattr(client, "requests_per_minute"):
            rate_limit_check(client=client)
        return True
