"""Where a unit of background work spends its time: slow dependencies add their seconds to the current
account, which the pipeline opens per task and keeps in `MemoryTask.timings`."""

import time
from contextlib import contextmanager
from contextvars import ContextVar

_account: ContextVar[dict | None] = ContextVar("timing_account", default=None)


@contextmanager
def timed(kind: str):
    """Adds the block's wall time to `<kind>_s` of the current account (nothing outside one)."""
    account = _account.get()
    if account is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        account[f"{kind}_s"] = account.get(f"{kind}_s", 0.0) + time.perf_counter() - started


@contextmanager
def account():
    """Opens an account for the block; yields the dict the timed blocks inside it fill."""
    totals: dict = {}
    token = _account.set(totals)
    try:
        yield totals
    finally:
        _account.reset(token)
