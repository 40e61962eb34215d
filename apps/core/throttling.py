"""Per-client rate limits (`Client.requests_per_minute`, else API_REQUESTS_PER_MINUTE; 0 = none) in a
fixed one-minute window, one atomic INCR in the shared Redis; unreachable Redis lets requests through."""

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


def rate_limit_check(*, client) -> None:
    """Counts one request of the client; RateLimited when it is over its limit."""
    own = getattr(client, "requests_per_minute", None)
    limit = settings.API_REQUESTS_PER_MINUTE if own is None else own
    if not limit:
        return
    window = int(time.time() // WINDOW_SECONDS)
    key = f"rate-limit:{client.pk}:{window}"
    replies = request_redis.run(lambda pipeline: pipeline.incr(key).expire(key, WINDOW_SECONDS + 1))
    if replies is not None and replies[0] > limit:
        raise RateLimited(limit=limit, wait=max(1.0, (window + 1) * WINDOW_SECONDS - time.time()))


class ClientRateThrottle(BaseThrottle):
    def allow_request(self, request, view):
        client = request.user
        if client is not None and getattr(client, "is_authenticated", False) and hasattr(client, "requests_per_minute"):
            rate_limit_check(client=client)
        return True
