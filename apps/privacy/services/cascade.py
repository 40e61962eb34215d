"""What follows when a caller deletes or edits something the platform learned from or compiled,
in one place. The rules are erasure's (the steps of apps.privacy.services.purge and the lint of
compiled pages), applied to a smaller selection than a user or a client. The apps owning the
endpoints reach these through the hooks apps.privacy registers from its ready()
(apps.memories.changes, apps.skills.changes, the DELETE_SESSION handler):

- a memory deleted: `memory_delete`, the provenance cascade of that one memory (and of the memories
  consolidation merged with it) under its owner's work locks: mentions, page sources and revisions
  quoting it go, the pages are cleared and recompiled, entities only it named go; then
  `items_removed` lints the organisation's pages, as erasure does when it finishes, and
  `copies_forget` runs;
- a memory edited: `memory_edited` projects again the sessions it was learned from (its mentions
  follow its new text) and marks every page quoting it stale, to be recompiled;
- a session deleted: apps.conversations queues DELETE_SESSION, whose handler runs `session_purge`:
  the provenance cascade (apps.privacy.services.provenance.session_delete) over the session's turns
  under the locks erasure takes for its owner;
- an experience deleted: `experience_delete`, erasure's skill step for that one experience;
- a session, a turn or a memory deleted: `copies_forget` runs the steps apps above privacy
  registered for copies they keep outside the tables (export archives waiting for download).
"""

import logging
from collections import Counter
from dataclasses import dataclass

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import QuerySet

from apps.conversations.models import Message, Session
from apps.conversations.routing import projection_enqueue
from apps.pipeline.locks import WorkOf, advisory_locks, work_lock_keys
from apps.privacy.services.provenance import (
    Derived,
    forget_skills,
    memory_forget,
    session_delete,
)
from apps.privacy.services.subjects import Subject
from apps.profiles.models import ItemType
from apps.profiles.services.entities import profiles_lint_enqueue
from apps.profiles.services.lint import profiles_mark_stale
from apps.skills.models import SkillExperience

logger = logging.getLogger(__name__)

SESSION_KIND = "session"


@dataclass(frozen=True)
class SessionSubject(Subject):
    """One session as the subject of erasure's steps: its turns, its experiences, and the memories
    learned from its turns alone (a memory also learned from another session stays)."""

    session: Session | None = None

    @property
    def exists(self) -> bool:
        return self.session is not None

    def sessions(self) -> QuerySet:
        return Session.objects.filter(pk=self.session.pk) if self.exists else Session.objects.none()

    def messages(self) -> QuerySet:
        return Message.objects.filter(session_id=self.session.pk) if self.exists else Message.objects.none()

    def experiences(self) -> QuerySet:
        return (
            SkillExperience.objects.filter(session_id=self.session.pk)
            if self.exists
            else SkillExperience.objects.none()
        )

    def memories(self, model) -> QuerySet:
        if not self.exists:
            return model.objects.none()
        return model.objects.filter(
            organization_id=self.session.organization_id,
            scope=self.session.scope,
            end_user_id=self.session.end_user_id,
            source_message_ids__contained_by=ArraySubquery(self.messages().values("pk")),
        ).exclude(source_message_ids=[])


# Copies outside the tables ---------------------------------------------------------------------

# `step(*, organization, user_id, scope) -> {name: count}`, registered by apps above privacy from their
# ready(): rows of that end user in that scope were deleted, and copies the app keeps of them must go.
COPY_STEPS: list = []


def register_copies_step(step) -> None:
    if step not in COPY_STEPS:
        COPY_STEPS.append(step)


def copies_forget(*, organization, user_id: str, scope: str) -> dict:
    """Rows of `user_id` in `scope` are gone: every registered step removes its copies of them."""
    counts = Counter()
    for step in COPY_STEPS:
        counts.update(step(organization=organization, user_id=user_id, scope=scope))
    return dict(counts)


# Memories --------------------------------------------------------------------------------------


def memory_delete(*, memory, actor: str) -> dict:
    """DELETE memory/<episodic|semantic>/<id> and MCP delete_memory: provenance.memory_forget under the
    owner's work locks (those erasure takes), waited for at most DELETE_WAIT_SECONDS (LockNotAvailable
    after: the caller answers 409). Then the organisation's pages are linted, as after an erasure, and
    the copies kept outside the tables of the owner's rows in its scope are removed."""
    owner = WorkOf(organization_id=memory.organization_id, end_user_ids=(memory.end_user_id,))
    user_id = memory.end_user.user_id
    with advisory_locks(work_lock_keys(owner), timeout=settings.DELETE_WAIT_SECONDS):
        counts = memory_forget(memory=memory, actor=actor)
    items_removed(organization=memory.organization)
    copies_forget(organization=memory.organization, user_id=user_id, scope=memory.scope)
    return counts


def items_removed(*, organization) -> None:
    """Turns or memories are gone: what cited them follows (erasure's closing lint)."""
    profiles_lint_enqueue(organization=organization)


def memory_edited(*, memory, memory_type: str) -> dict:
    """A memory's text changed: its mentions are projected again from the sessions it was learned
    from, and the pages quoting it are marked stale and recompiled."""
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


# Sessions --------------------------------------------------------------------------------------


def _session_locks(session: Session, subject: Subject) -> list[str]:
    """The work on the owner and on the scopes its experiences feed waits while the session goes:
    every lock the apps registered for them (the locks erasure takes for a user)."""
    scopes = tuple(sorted(set(subject.experiences().values_list("scope", flat=True))))
    return work_lock_keys(
        WorkOf(organization_id=session.organization_id, end_user_ids=(session.end_user_id,), scopes=scopes)
    )


def session_purge(*, session_pk) -> dict:
    """Deletes one session's turns and what was derived from them (the provenance cascade), under
    the locks erasure takes for the session's owner; returns counts per table."""
    session = Session.objects.select_related("organization", "end_user").filter(pk=session_pk).first()
    if session is None:
        return {"skipped": "session no longer exists"}
    subject = SessionSubject(
        organization=session.organization, kind=SESSION_KIND, subject_id=str(session.pk), session=session
    )
    with advisory_locks(_session_locks(session, subject)):
        counts = session_delete(session=session, actor=f"session-delete:{session.pk}")
    counts.update(
        copies_forget(organization=session.organization, user_id=session.end_user.user_id, scope=session.scope)
    )
    items_removed(organization=session.organization)
    logger.info("session %s deleted: %s", session_pk, {table: n for table, n in counts.items() if n})
    return counts


# Experiences -----------------------------------------------------------------------------------


def experience_delete(*, experience: SkillExperience) -> dict:
    """Skills evolved from it are deleted when it was their only source, otherwise scrubbed of its
    text and returned to review (erasure's rule); then it goes."""
    work = WorkOf(organization_id=experience.organization_id, end_user_ids=(), scopes=(experience.scope,))
    with advisory_locks(work_lock_keys(work)):
        derived = Derived(
            organization_id=experience.organization_id,
            turns=Message.objects.none(),
            extra_experiences=SkillExperience.objects.filter(pk=experience.pk),
        )
        return forget_skills(derived, actor=f"experience-delete:{experience.pk}")
