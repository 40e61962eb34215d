"""What follows when a memory is deleted, edited or merged away by this app (its endpoints, consolidation):
steps that apps above it register from their ready(), so this app never imports them. apps.privacy
registers the provenance cascade: a deleted memory takes what was compiled from it along, an edited one
has its pages recompiled."""

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class MemoryChange:
    """One app's steps, each optional:

    - `delete(memory=, actor=)` deletes the memory (with the memories consolidation merged with it) and
      what derives from it, raising apps.pipeline.locks.LockNotAvailable when learning holds its owner's
      work for longer than DELETE_WAIT_SECONDS (nothing is deleted then);
    - `edited(memory=, memory_type=)`: the memory's text changed;
    - `removed(organization=)`: memories of the organisation were merged away or retired.
    """

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
