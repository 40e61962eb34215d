"""Where deliveries may connect, and for how long. Every connection resolves its host name once, checks every
address the name resolves to, and connects to a checked address (so a DNS answer that changes between a check
and the connect, DNS rebinding, cannot slip through; TLS still verifies the name, the Host header is the
URL's). Loopback, private, shared, link-local, multicast, reserved and unspecified addresses are refused
unless WEBHOOK_ALLOWED_NETWORKS lists them; an IPv6 address carrying an IPv4 one (IPv4-mapped, 6to4, Teredo,
NAT64) is judged by that IPv4 address as well. Every read, write and connect of an attempt shares one
wall-clock deadline. Built on httpcore2's network-backend interface (the transport layer under httpx2) and
the standard library's `ipaddress`."""

import contextvars
import ipaddress
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager

import httpcore2
import httpx2
from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """The target's host resolves to an address deliveries may not reach (or its URL carries userinfo)."""


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """WEBHOOK_ALLOWED_NETWORKS parsed (the settings check has refused a malformed entry already)."""
    return [ipaddress.ip_network(entry.strip(), strict=False) for entry in settings.WEBHOOK_ALLOWED_NETWORKS]


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address.sixtofour:
        return address.sixtofour
    if address.teredo:
        return address.teredo[1]
    if address in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_allowed(address: Address) -> bool:
    """Public unicast addresses always; any other only inside WEBHOOK_ALLOWED_NETWORKS."""
    candidates = [address]
    if address.version == 6 and (carried := _carried_ipv4(address)) is not None:
        candidates.append(carried)
    networks = allowed_networks()
    if any(
        candidate in network for candidate in candidates for network in networks if candidate.version == network.version
    ):
        return True
    return all(candidate.is_global and not candidate.is_multicast for candidate in candidates)


def resolve(host: str, port: int, *, timeout: float) -> list[Address]:
    """The addresses `host` resolves to (numeric spellings such as `2130706433` or `127.1` included), in the
    resolver's order; the lookup is abandoned after `timeout` seconds. socket.gaierror when it fails."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook-dns")
    try:
        infos = executor.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM).result(timeout=timeout)
    except FutureTimeout:
        raise httpcore2.ConnectTimeout("name resolution timed out") from None
    finally:
        executor.shutdown(wait=False)
    addresses = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def checked_addresses(host: str, port: int, *, timeout: float) -> list[Address]:
    """The addresses to connect to; AddressRefused when any address of the name is not allowed."""
    addresses = resolve(host, port, timeout=timeout)
    if not addresses or not all(address_allowed(address) for address in addresses):
        raise AddressRefused(host)
    return addresses


_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("webhook_deadline", default=None)


@contextmanager
def deadline(seconds: float):
    """Everything the guarded connections of this context do ends within `seconds` of now."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _remaining(timeout: float | None, error: type[Exception]) -> float | None:
    """The smaller of an operation's own timeout and what is left of the deadline; `error` once it passed."""
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, stream: httpcore2.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _remaining(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _remaining(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        timeout = _remaining(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class GuardedBackend(httpcore2.SyncBackend):
    """httpcore2's socket backend, connecting only to checked addresses and within the deadline."""

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = checked_addresses(host, port, timeout=_remaining(timeout, httpcore2.ConnectTimeout))
        error = None
        for address in addresses:
            try:
                stream = super().connect_tcp(
                    str(address),
                    port,
                    timeout=_remaining(timeout, httpcore2.ConnectTimeout),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectError as exc:
                error = exc
                continue
            return _DeadlineStream(stream)
        raise error


DEFAULT_PORTS = {"http": 80, "https": 443}


def url_refusal(value: str) -> str | None:
    """Why an endpoint URL is refused at registration (userinfo, or a host resolving to an address deliveries
    may not reach), or None. A name that does not resolve now is accepted: every connection checks again."""
    url = httpx2.URL(value)
    if url.userinfo:
        return "Enter a URL without a user name or password; deliveries are signed with the endpoint's secret."
    try:
        addresses = resolve(url.raw_host.decode("ascii"), url.port or DEFAULT_PORTS.get(url.scheme, 443), timeout=2.0)
    except (OSError, UnicodeError, httpcore2.ConnectTimeout):
        return None
    if all(address_allowed(address) for address in addresses):
        return None
    return (
        "Enter a URL whose host is a public address: loopback, private, link-local, multicast and reserved "
        "addresses are refused (an operator may allow networks with WEBHOOK_ALLOWED_NETWORKS)."
    )
