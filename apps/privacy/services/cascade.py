"""The cascade: what follows when a caller deletes or edits something the platform learned from or compiled,
erasure's rules applied to a smaller selection, reached through the hooks apps.privacy registers from its
ready(). Its steps (and the turn and session deletes built from them) are provenance.py's."""

import logging
from collections import Counter

from django.conf import settings

from apps.conversations.models import Message, Session
from apps.conversations.routing import projection_enqueue
from apps.pipeline.locks import WorkOf, advisory_locks, work_lock_keys
from apps.privacy.services.provenance import Derived, forget_skills, memory_forget, session_delete
from apps.profiles.models import ItemType
from apps.profiles.services.entities import profiles_lint_enqueue
from apps.profiles.services.lint import profiles_mark_stale
from apps.skills.models import SkillExperience

logger = logging.getLogger(__name__)

# `step(*, organization, user_id, scope) -> {name: count}` from apps above privacy: copies of deleted rows go.
COPY_STEPS: list = []


def register_copies_step(step) -> None:
    if step not in COPY_STEPS:
        COPY_STEPS.append(step)


def copies_forget(*, organization, user_id: str, scope: str) -> dict:
    counts = Counter()
    for step in COPY_STEPS:
        counts.update(step(organization=organization, user_id=user_id, scope=scope))
    return dict(counts)


def memory_delete(*, memory, actor: str) -> dict:
    """Under the owner's work locks, waited for at most DELETE_WAIT_SECONDS (LockNotAvailable: the caller answers 409)."""
    owner = WorkOf(organization_id=memory.organization_id, end_user_ids=(memory.end_user_id,))
    user_id = memory.end_user.user_id
    with advisory_locks(work_lock_keys(owner), timeout=settings.DELETE_WAIT_SECONDS):
        counts = memory_forget(memory=memory, actor=actor)
    items_removed(organization=memory.organization)
    copies_forget(organization=memory.organization, user_id=user_id, scope=memory.scope)
    return counts


def items_removed(*, organization) -> None:
    """Erasure's closing lint."""
    profiles_lint_enqueue(organization=organization)


def memory_edited(*, memory, memory_type: str) -> dict:
    """Its sessions are projected again (its mentions follow its text); pages quoting it are recompiled."""
    sessions = Session.objects.filter(
        pk__in=Message.objects.filter(pk__in=memory.source_message_ids).values("session_id")
    ).select_related("organization", "end_user")
    projected = sum(projection_enqueue(session) is not None for session in sessions)
    stale = profiles_mark_stale(
        item_type=ItemType(memory_type),
        item_id=memory.pk,
        detail=f"A {memory_type} memory this page quotes was edited; the page is being recompiled.",
    )
    return {"sessions_projected": projected, "profiles_stale": stale}


def session_purge(*, session_pk) -> dict:
    session = Session.objects.select_related("organization", "end_user").filter(pk=session_pk).first()
    if session is None:
        return {"skipped": "session no longer exists"}
    # Work on the owner and on the scopes its experiences feed waits while the session goes.
    scopes = SkillExperience.objects.filter(session_id=session.pk).values_list("scope", flat=True)
    owner = WorkOf(
        organization_id=session.organization_id, end_user_ids=(session.end_user_id,), scopes=tuple(sorted(set(scopes)))
    )
    with advisory_locks(work_lock_keys(owner)):
        counts = session_delete(session=session, actor=f"session-delete:{session.pk}")
    counts.update(
        copies_forget(organization=session.organization, user_id=session.end_user.user_id, scope=session.scope)
    )
    items_removed(organization=session.organization)
    logger.info("session %s deleted: %s", session_pk, {table: n for table, n in counts.items() if n})
    return counts


def experience_delete(*, experience: SkillExperience) -> dict:
    """Erasure's skill step for that one experience."""
    work = WorkOf(organization_id=experience.organization_id, end_user_ids=(), scopes=(experience.scope,))
    with advisory_locks(work_lock_keys(work)):
        derived = Derived(
            organization_id=experience.organization_id,
            turns=Message.objects.none(),
            extra_experiences=SkillExperience.objects.filter(pk=experience.pk),
        )
        return forget_skills(derived, actor=f"experience-delete:{experience.pk}")
