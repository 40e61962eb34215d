"""Handlers by task type, and the priority their tasks are claimed at. Apps register theirs; the
pipeline never imports the apps."""

import functools
from collections.abc import Callable

HANDLERS: dict[str, Callable] = {}
PRIORITIES: dict[str, int] = {}
# Task types whose retries back off by settings of their own: (base setting, cap setting) names.
BACKOFFS: dict[str, tuple[str, str]] = {}
# Task types whose due tasks a process claims several at a time: (prepare, size setting name). The
# executor calls `prepare(tasks)` once for the claimed tasks, then runs the handler of each it took.
BATCHES: dict[str, tuple[Callable, str]] = {}
# Task types whose tasks only the client whose request created them may read (GET tasks/<id>/).
REQUESTER_ONLY: set[str] = set()
# Task types run by workers of a Celery queue of their own (`celery worker -Q <queue>`), never by the
# default workers, so their slowness cannot hold anyone else's work: task type -> queue name.
QUEUES: dict[str, str] = {}
# Task types of which at most N run at once per organisation: task type -> the setting naming N.
ORGANIZATION_CAPS: dict[str, str] = {}


class NotYet(Exception):  # noqa: N818  (not a failure: the task waits and runs again)
    """A handler cannot work yet (a lock held, input still being produced): the task is queued again
    `retry_in` seconds out (default TASK_NOT_YET_SECONDS) without spending an attempt."""

    def __init__(self, message: str = "", *, retry_in: float | None = None):
        super().__init__(message)
        self.retry_in = retry_in


def register_handler(
    task_type: str,
    *,
    priority: int | None = None,
    requester_only: bool = False,
    backoff: tuple[str, str] | None = None,
    batch: tuple[Callable, str] | None = None,
    queue: str | None = None,
    organization_cap: str | None = None,
):
    """Decorator of a handler `handle(task)` returning a JSON-able result, claimed at `priority` (default
    COMPILE). `requester_only`: its tasks are the requesting client's alone (an export's); `backoff`:
    the (base, cap) setting names its retries back off by (a webhook retries sooner than a model call);
    `batch`: (prepare, size setting name): a process claims up to that many due tasks of the type and
    priority together and calls `prepare(tasks)` once before their handlers (work they share, such as
    one embedding call); it returns how many of them, from the first, it took (the rest go back to the
    queue unstarted, so a batch stays within the time limits). `prepare` must leave each handler correct
    on its own, since a task whose `prepare` failed, or that is retried, runs without it;
    `queue`: the Celery queue whose workers alone run its tasks (default: the default workers);
    `organization_cap`: the setting naming how many of its tasks may run at once per organisation."""

    def decorator(function):
        if task_type in HANDLERS and HANDLERS[task_type] is not function:
            raise RuntimeError(f"A handler for {task_type!r} is already registered")
        HANDLERS[task_type] = function
        if priority is not None:
            PRIORITIES[task_type] = priority
        if requester_only:
            REQUESTER_ONLY.add(task_type)
        if backoff is not None:
            BACKOFFS[task_type] = backoff
        if batch is not None:
            BATCHES[task_type] = batch
        if queue is not None:
            QUEUES[task_type] = queue
        if organization_cap is not None:
            ORGANIZATION_CAPS[task_type] = organization_cap
        return function

    return decorator


def payload_row(key: str, queryset, *, gone: str, **skipped):
    """Decorator of a handler `handle(task, row)`: it is called with the row of `queryset` whose primary
    key is `task.payload[key]`. A row deleted since the task was queued leaves nothing to do: the task
    succeeds with `{"skipped": "<gone> no longer exists", **skipped}`."""

    def decorator(handler):
        @functools.wraps(handler)
        def handle(task) -> dict:
            row = queryset.filter(pk=task.payload[key]).first()
            if row is None:
                return {"skipped": f"{gone} no longer exists", **skipped}
            return handler(task, row)

        return handle

    return decorator


def handler_for(task_type: str) -> Callable:
    try:
        return HANDLERS[task_type]
    except KeyError:
        raise LookupError(f"No handler is registered for task type {task_type!r}") from None


def backoff_of(task_type: str) -> tuple[str, str]:
    return BACKOFFS.get(task_type, ("TASK_RETRY_BASE_SECONDS", "TASK_RETRY_MAX_SECONDS"))


def queue_of(task_type: str) -> str | None:
    """The Celery queue of a task type's own workers; None: the default queue."""
    return QUEUES.get(task_type)


def lanes() -> list[str | None]:
    """Every queue tasks are published to: None (the default) and each registered one."""
    return [None, *sorted(set(QUEUES.values()))]
