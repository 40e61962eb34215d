"""Handlers by task type, and the priority their tasks are claimed at. Apps register theirs; the
pipeline never imports the apps."""

from collections.abc import Callable

HANDLERS: dict[str, Callable] = {}
PRIORITIES: dict[str, int] = {}
# Task types whose retries back off by settings of their own: (base setting, cap setting) names.
BACKOFFS: dict[str, tuple[str, str]] = {}
# Task types whose tasks only the client whose request created them may read (GET tasks/<id>/).
REQUESTER_ONLY: set[str] = set()


class NotYet(Exception):  # noqa: N818  (not a failure: the task waits and runs again)
    """Raised by a handler that cannot do its work yet (a lock another task holds, input another task
    is still producing): the task goes back to the queue `retry_in` seconds out (default
    TASK_NOT_YET_SECONDS) without spending an attempt."""

    def __init__(self, message: str = "", *, retry_in: float | None = None):
        super().__init__(message)
        self.retry_in = retry_in


def register_handler(
    task_type: str,
    *,
    priority: int | None = None,
    requester_only: bool = False,
    backoff: tuple[str, str] | None = None,
):
    """Decorator: `@register_handler("embed_messages", priority=MemoryTask.Priority.URGENT) def
    handle(task): ...` returns a JSON-able result. Due tasks are claimed by priority (default
    COMPILE), then by due time; enqueue may set another priority for one task.

    `requester_only`: the tasks are the requesting client's alone (an export's), not visible to
    readers of their scope or, for organisation-wide work, to clients with can_erase.

    `backoff`: the names of the settings (base, cap) its failed attempts back off by, instead of
    TASK_RETRY_BASE_SECONDS and TASK_RETRY_MAX_SECONDS (a webhook retries sooner than a model call)."""

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
        return function

    return decorator


def handler_for(task_type: str) -> Callable:
    try:
        return HANDLERS[task_type]
    except KeyError:
        raise LookupError(f"No handler is registered for task type {task_type!r}") from None


def priority_of(task_type: str, default: int) -> int:
    return PRIORITIES.get(task_type, default)


def backoff_of(task_type: str) -> tuple[str, str]:
    """The names of the settings a failed task of this type backs off by: (base, cap)."""
    return BACKOFFS.get(task_type, ("TASK_RETRY_BASE_SECONDS", "TASK_RETRY_MAX_SECONDS"))
