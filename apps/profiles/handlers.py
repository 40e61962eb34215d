"""Pipeline handlers of compiled memory: thin, they load by id and call a service. Projection and
compilation of one user's memory hold the same per-user lock, so they never interleave."""

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.conversations.models import Session
from apps.conversations.routing import PROJECT_ENTITIES, extraction_pending_until, projection_pending
from apps.pipeline.locks import UserLocks, advisory_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import NotYet, payload_row, register_handler
from apps.profiles.models import Entity
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import COMPILE_PROFILE, COMPILE_TOPICS, LINT_PROFILES, session_project
from apps.profiles.services.lint import profiles_lint
from apps.profiles.services.topics import topics_compile
from apps.tenancy.models import EndUser, Organization

OWNER_LOCKS = UserLocks("profiles")  # projection and compilation; registered in ProfilesConfig.ready


@register_handler(PROJECT_ENTITIES, priority=MemoryTask.Priority.LEARN)
@payload_row("session", Session.objects.select_related("organization", "end_user"), gone="session")
def handle_project_entities(task, session) -> dict:
    extraction_due = extraction_pending_until(session)
    if extraction_due is not None:  # it reads what the extraction writes: ask again once that has run
        wait = (extraction_due - timezone.now()).total_seconds()
        raise NotYet("the session's memories are still being extracted", retry_in=max(wait + 1, 1))
    with advisory_lock(OWNER_LOCKS.key_of(session), wait=False):
        return session_project(session=session)


# How long a compile gives way to projections before it runs anyway (a user always talking still gets pages).
COMPILE_YIELDS_FOR_SECONDS = 300


def _yield_to_projections(task, *, organization_id, end_user_id) -> None:
    """Pages are compiled from what projection writes, under the same lock: a compile while a projection is due
    would hold the lock against it and then be redone, so it waits (up to COMPILE_YIELDS_FOR_SECONDS)."""
    first_due = parse_datetime(task.timings.get("first_due_at", "")) or task.run_after
    if (timezone.now() - first_due).total_seconds() > COMPILE_YIELDS_FOR_SECONDS:
        return
    if projection_pending(organization_id=organization_id, end_user_id=end_user_id):
        raise NotYet("a projection of the owner's sessions comes first")


@register_handler(COMPILE_PROFILE)
@payload_row("entity", Entity.objects.select_related("organization"), gone="entity")
def handle_compile_profile(task, entity) -> dict:
    _yield_to_projections(task, organization_id=entity.organization_id, end_user_id=entity.end_user_id)
    with advisory_lock(OWNER_LOCKS.key_of(entity), wait=False):
        return profile_compile(entity=entity, task=task)


@register_handler(LINT_PROFILES, priority=MemoryTask.Priority.MAINTENANCE)
def handle_lint_profiles(task) -> dict:
    return profiles_lint(organization_id=task.payload.get("organization"), task=task)


@register_handler(COMPILE_TOPICS)
@payload_row("organization", Organization.objects.all(), gone="organisation")
def handle_compile_topics(task, organization) -> dict:
    end_user = None
    if task.payload.get("end_user"):
        end_user = EndUser.objects.filter(pk=task.payload["end_user"], organization=organization).first()
        if end_user is None:
            return {"skipped": "user no longer exists"}
        _yield_to_projections(task, organization_id=organization.pk, end_user_id=end_user.pk)
    return topics_compile(
        organization=organization,
        scope=task.payload.get("scope"),
        end_user=end_user,
        task=task,
        lock=lambda user: advisory_lock(
            OWNER_LOCKS.key(organization_id=organization.pk, end_user_id=user.pk), wait=False
        ),
    )
