"""What follows when a skill experience is deleted through its endpoint: apps above this one (apps.privacy)
register it from their ready(), so this app never imports them."""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

_EXPERIENCE_DELETES: list[Callable] = []


def register_experience_change(*, delete: Callable) -> None:
    if delete not in _EXPERIENCE_DELETES:
        _EXPERIENCE_DELETES.append(delete)


def cascade_experience_delete(*, experience) -> None:
    if not _EXPERIENCE_DELETES:
        raise ImproperlyConfigured("No app registered how an experience is deleted (apps.privacy does).")
    for delete in _EXPERIENCE_DELETES:
        delete(experience=experience)
