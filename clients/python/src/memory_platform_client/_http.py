"""What the two clients share: one description of each API call, the retry policy, and the two
small drivers (blocking and async) that carry the calls out.

Every operation is written once, as a generator that yields what it needs done (`Call`, `Sleep`,
or `Item` for an iterator) and receives the result, so `MemoryClient` and `AsyncMemoryClient`
cannot drift apart.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import random
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2 as httpx

from memory_platform_client import __version__
from memory_platform_client.errors import APIConnectionError, MemoryPlatformError, error_from_body

API_PREFIX = "/api/v1/"
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # relative to /api/v1/
    params: dict | None = None
    json: Any = None
    headers: dict | None = None


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Item:
    value: Any


Op = Generator[Call | Sleep | Item, Any, Any]


@dataclass(frozen=True)
class Retries:
    """Retries after a connection error, a 429 (waiting what `Retry-After` says, at most
    `max_retry_after` seconds) or a 5xx (exponential backoff with jitter, capped at `max_backoff`);
    never after another 4xx. Every call is safe to repeat: reads and deletes are idempotent, and
    each `add` carries an `Idempotency-Key` the platform replays."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def after_error(self, attempt: int) -> float | None:
        if attempt >= self.max_retries:
            return None
        return min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)

    def after_response(self, response: httpx.Response, attempt: int) -> float | None:
        status = response.status_code
        if attempt >= self.max_retries or not (status == 429 or status >= 500):
            return None
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return self.after_error(attempt)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def api_base_url(base_url: str) -> str:
    """`http://host:8000`, `http://host:8000/` and `http://host:8000/api/v1` all mean the same API."""
    base = base_url.rstrip("/")
    if base.endswith(API_PREFIX.rstrip("/")):
        base = base[: -len(API_PREFIX.rstrip("/"))]
    return base + API_PREFIX


def client_headers(api_key: str) -> dict:
    if not api_key:
        raise ValueError("api_key is required (a key printed by `make run` or `create_client`)")
    return {"Authorization": f"Api-Key {api_key}", "User-Agent": f"memory-platform-client/{__version__}"}


def query_params(params: dict | None) -> dict | None:
    """Query values as the platform reads them: None left out, booleans as true/false, lists repeated."""
    if not params:
        return None
    encoded = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (dt.datetime, dt.date)):
            value = value.isoformat()
        elif isinstance(value, dict):
            value = json.dumps(value)
        encoded[key] = value
    return encoded


def decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    return response.json()


def raise_for_error(response: httpx.Response) -> None:
    try:
        body = response.json()
    except ValueError:
        body = None
    raise error_from_body(response.status_code, body, headers=response.headers)


def _connection_error(call: Call, exc: Exception) -> APIConnectionError:
    return APIConnectionError(f"{call.method} {API_PREFIX}{call.path} failed: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class _Done:
    value: Any


def _first(op: Op):
    try:
        return op.send(None)
    except StopIteration as stop:
        return _Done(stop.value)


def _resume(op: Op, value: Any = None, *, error: Exception | None = None):
    """The operation's next step after a call: its result sent in, or its error raised in it (an
    operation may catch a platform error, e.g. a 404 meaning "not there yet")."""
    try:
        return op.throw(error) if error is not None else op.send(value)
    except StopIteration as stop:
        return _Done(stop.value)


class SyncDriver:
    def __init__(self, http: httpx.Client, retries: Retries):
        self.http = http
        self.retries = retries

    def send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self.http.request(
                    call.method, call.path, params=query_params(call.params), json=call.json, headers=call.headers
                )
            except httpx.TransportError as exc:
                delay = self.retries.after_error(attempt)
                if delay is None:
                    raise _connection_error(call, exc) from exc
            else:
                if response.is_success:
                    return decode(response)
                delay = self.retries.after_response(response, attempt)
                if delay is None:
                    raise_for_error(response)
            time.sleep(delay)
            attempt += 1

    def _perform(self, step) -> Any:
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        return self.send(step)

    def run(self, op: Op) -> Any:
        step = _first(op)
        while not isinstance(step, _Done):
            try:
                value = self._perform(step)
            except MemoryPlatformError as error:
                step = _resume(op, error=error)
            else:
                step = _resume(op, value)
        return step.value

    def iterate(self, op: Op):
        value = None
        while True:
            try:
                step = op.send(value)
            except StopIteration:
                return
            if isinstance(step, Item):
                value = None
                yield step.value
            else:
                value = self._perform(step)

    def collect(self, op: Op) -> list:
        return list(self.iterate(op))


class AsyncDriver:
    def __init__(self, http: httpx.AsyncClient, retries: Retries):
        self.http = http
        self.retries = retries

    async def send(self, call: Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    call.method, call.path, params=query_params(call.params), json=call.json, headers=call.headers
                )
            except httpx.TransportError as exc:
                delay = self.retries.after_error(attempt)
                if delay is None:
                    raise _connection_error(call, exc) from exc
            else:
                if response.is_success:
                    return decode(response)
                delay = self.retries.after_response(response, attempt)
                if delay is None:
                    raise_for_error(response)
            await anyio.sleep(delay)
            attempt += 1

    async def _perform(self, step) -> Any:
        if isinstance(step, Sleep):
            await anyio.sleep(step.seconds)
            return None
        return await self.send(step)

    async def run(self, op: Op) -> Any:
        step = _first(op)
        while not isinstance(step, _Done):
            try:
                value = await self._perform(step)
            except MemoryPlatformError as error:
                step = _resume(op, error=error)
            else:
                step = _resume(op, value)
        return step.value

    async def iterate(self, op: Op):
        value = None
        while True:
            try:
                step = op.send(value)
            except StopIteration:
                return
            if isinstance(step, Item):
                value = None
                yield step.value
            else:
                value = await self._perform(step)

    async def collect(self, op: Op) -> list:
        return [item async for item in self.iterate(op)]
