"""Handlers by task type. Apps register theirs; the pipeline never imports the apps."""

from collections.abc import Callable

HANDLERS: dict[str, Callable] = {}


def register_handler(task_type: str):
    """Decorator: `@register_handler("embed_messages") def handle(task): ...` returns a JSON-able result."""

    def decorator(function):
        if task_type in HANDLERS and HANDLERS[task_type] is not function:
            raise RuntimeError(f"A handler for {task_type!r} is already registered")
        HANDLERS[task_type] = function
        return function

    return decorator


def handler_for(task_type: str) -> Callable:
    try:
        return HANDLERS[task_type]
    except KeyError:
        raise LookupError(f"No handler is registered for task type {task_type!r}") from None
