"""Redis clients for the URLs the settings name: one server, or Sentinels in Celery's form
(`sentinel://host:26379/0;sentinel://host2:26379/0`) asked for REDIS_SENTINEL_MASTER after every failover."""

from urllib.parse import unquote, urlsplit

import redis
from django.conf import settings
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "sentinel://"
SENTINEL_PORT = 26379


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME)


def sentinel_addresses(url: str) -> tuple[list[tuple[str, int]], dict]:
    """The (host, port) of each Sentinel, and the primary's `db` and `password` from the first, as Celery."""
    addresses, options = [], {}
    for position, part in enumerate(chunk for chunk in url.split(";") if chunk.strip()):
        parsed = urlsplit(part.strip())
        if parsed.scheme != "sentinel" or not parsed.hostname:
            raise ValueError(f"not a Sentinel address: {parsed.scheme}://{parsed.hostname or ''}")
        addresses.append((parsed.hostname, parsed.port or SENTINEL_PORT))
        if position == 0:
            options["db"] = int(parsed.path.strip("/") or 0)
            if parsed.password:
                options["password"] = unquote(parsed.password)
    return addresses, options


def redis_client(url: str, *, socket_timeout: float, socket_connect_timeout: float) -> redis.Redis:
    """For Sentinels, each new connection asks them where the primary is."""
    timeouts = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_connect_timeout}
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **timeouts)
    addresses, options = sentinel_addresses(url)
    sentinels = Sentinel(addresses, sentinel_kwargs=timeouts, **timeouts)
    return sentinels.master_for(settings.REDIS_SENTINEL_MASTER, **options, **timeouts)


def redis_address(url: str) -> str:
    """Where a URL points, without its password, for messages."""
    if is_sentinel_url(url):
        addresses, _ = sentinel_addresses(url)
        hosts = ", ".join(f"{host}:{port}" for host, port in addresses)
        return f"Sentinels {hosts} (primary {settings.REDIS_SENTINEL_MASTER!r})"
    return url.split("@")[-1]
