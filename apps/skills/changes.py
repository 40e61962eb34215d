"""What follows when a skill experience is deleted through its endpoint: the delete that apps above this
one register from their ready(), so this app never imports them. apps.privacy registers erasure's skill
step for one experience (a skill evolved from it alone goes, one with other sources is scrubbed and
returned to review, then the experience goes)."""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

# `delete(experience=)`: deletes the experience and what was evolved from it.
_EXPERIENCE_DELETES: list[Callable] = []


def register_experience_change(*, delete: Callable) -> None:
    if delete not in _EXPERIENCE_DELETES:
        _EXPERIENCE_DELETES.append(delete)


def cascade_experience_delete(*, experience) -> None:
    if not _EXPERIENCE_DELETES:
        raise ImproperlyConfigured("No app registered how an experience is deleted (apps.privacy does).")
    for delete in _EXPERIENCE_DELETES:
        delete(experience=experience)
