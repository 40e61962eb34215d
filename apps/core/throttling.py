"""Rate limits in a fixed one-minute window, counted in the shared Redis (an unreachable Redis lets requests
through): per client (`Client.requests_per_minute`, else API_REQUESTS_PER_MINUTE) and per organisation
(ORGANIZATION_REQUESTS_PER_MINUTE, over all its clients) for the API; per client address for the pages that
take a password or hand out credentials (admin login, OAuth token and registration endpoints). 0 = no limit."""

import time
from functools import wraps

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

from apps.core import request_redis

WINDOW_SECONDS = 60
ADDRESS_KEY_PREFIX = "rate-limit:address:"
# Counts the client's request; only a request within the client's own limit counts for its organisation, so
# one client spending its own budget does not spend its siblings'. Both keys share a hash tag (one slot).
_CLIENT_THEN_ORGANIZATION = """
local mine = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
local own_limit, shared_limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if (own_limit > 0 and mine > own_limit) or shared_limit == 0 then
    return {mine, 0}
end
local ours = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {mine, ours}
"""


class RateLimited(exceptions.Throttled):
    default_code = "rate_limited"

    def __init__(self, *, limit: int, wait: float, who: str = "this client"):
        super().__init__(
            wait=wait,
            detail=f"Rate limit exceeded: {who} may make {limit} requests per minute.",
            code="rate_limited",
        )
        self.error_details = {"limit": f"{limit}/minute", "retry_after_seconds": self.wait}


def _window() -> tuple[int, float]:
    """The current window's number and the seconds until the next one."""
    window = int(time.time() // WINDOW_SECONDS)
    return window, max(1.0, (window + 1) * WINDOW_SECONDS - time.time())


def rate_limit_check(*, client) -> None:
    """Counts one request of the client; RateLimited when it is over its own limit or its organisation's."""
    own = getattr(client, "requests_per_minute", None)
    own_limit = settings.API_REQUESTS_PER_MINUTE if own is None else own
    shared_limit = settings.ORGANIZATION_REQUESTS_PER_MINUTE
    if not own_limit and not shared_limit:
        return
    window, wait = _window()
    keys = (
        f"rate-limit:{{{client.organization_id}}}:client:{client.pk}:{window}",
        f"rate-limit:{{{client.organization_id}}}:organization:{window}",
    )
    replies = request_redis.run(
        lambda pipeline: pipeline.eval(_CLIENT_THEN_ORGANIZATION, 2, *keys, own_limit, shared_limit, WINDOW_SECONDS + 1)
    )
    if replies is None:
        return
    mine, ours = replies[0]
    if own_limit and mine > own_limit:
        raise RateLimited(limit=own_limit, wait=wait)
    if shared_limit and ours > shared_limit:
        raise RateLimited(limit=shared_limit, wait=wait, who="this client's organisation")


class ClientRateThrottle(BaseThrottle):
    def allow_request(self, request, view):
        client = request.user
        if client is not None and getattr(client, "is_authenticated", False) and hasattr(client, "requests_per_minute"):
            rate_limit_check(client=client)
        return True


def address_wait(*, bucket: str, address: str, limit: int) -> float | None:
    """Counts one request from `address` in `bucket`: the seconds to wait when it is over `limit`, else None."""
    if not limit:
        return None
    window, wait = _window()
    key = f"{ADDRESS_KEY_PREFIX}{bucket}:{address}:{window}"
    replies = request_redis.run(lambda pipeline: pipeline.incr(key).expire(key, WINDOW_SECONDS + 1))
    return wait if replies is not None and replies[0] > limit else None


def limited_by_address(*, bucket: str, setting: str, methods=("POST",), json: bool = False):
    """A view decorator: its `methods` requests count per client address (REMOTE_ADDR: behind a proxy, the
    proxy's) against the `setting`'s limit a minute; over it, 429 with Retry-After."""

    def decorate(view):
        @wraps(view)
        def limited(request, *args, **kwargs):
            if request.method in methods:
                limit = getattr(settings, setting)
                address = request.META.get("REMOTE_ADDR") or "unknown"
                wait = address_wait(bucket=bucket, address=address, limit=limit)
                if wait is not None:
                    message = f"Too many requests from your address: at most {limit} a minute here ({setting})."
                    response = (
                        JsonResponse({"error": "rate_limited", "error_description": message}, status=429)
                        if json
                        else HttpResponse(message, status=429, content_type="text/plain; charset=utf-8")
                    )
                    response["Retry-After"] = str(int(wait))
                    return response
            return view(request, *args, **kwargs)

        return limited

    return decorate
