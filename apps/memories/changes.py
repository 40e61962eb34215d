"""What follows when a memory is deleted, edited or merged away here: steps that apps above register from
their ready() (apps.privacy.services.cascade), so this app never imports them."""

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class MemoryChange:
    """One app's optional steps: `delete(memory=, actor=)` deletes it, its merge group and what derives from them
    (LockNotAvailable when learning holds the owner too long); `edited(memory=, memory_type=)`: its text
    changed; `removed(organization=)`: memories were merged away or retired."""

    delete: Callable | None = None
    edited: Callable | None = None
    removed: Callable | None = None


_CHANGES: list[MemoryChange] = []


def register_memory_change(change: MemoryChange) -> None:
    if change not in _CHANGES:
        _CHANGES.append(change)


def cascade_delete(*, memory, actor: str) -> None:
    """Deletes the memory through the registered deletes: the memory rows are the cascade's to remove."""
    deletes = [change.delete for change in _CHANGES if change.delete]
    if not deletes:
        raise ImproperlyConfigured("No app registered how a memory is deleted (apps.privacy does).")
    for delete in deletes:
        delete(memory=memory, actor=actor)


def cascade_edit(*, memory, memory_type: str) -> None:
    for change in _CHANGES:
        if change.edited:
            change.edited(memory=memory, memory_type=memory_type)


def cascade_removal(*, organization) -> None:
    for change in _CHANGES:
        if change.removed:
            change.removed(organization=organization)
