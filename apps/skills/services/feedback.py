"""Writes of the evidence agents and people give about a skill: a use marked applied, a verdict."""

from django.utils import timezone

from apps.core.errors import ConflictError
from apps.skills.models import Skill, SkillFeedback, SkillUse
from apps.tenancy.models import EndUser


def skill_uses_apply(*, skill: Skill, client, user_id: str, session_id: str) -> dict:
    """Uses already marked keep the time they were first marked."""
    uses = SkillUse.objects.filter(
        skill=skill,
        organization_id=client.organization_id,
        end_user__in=EndUser.objects.filter(organization_id=client.organization_id, user_id=user_id),
        session_scope=client.write_scope,
        session_id=session_id,
    )
    if not uses.exists():
        raise ConflictError(
            f"Session {session_id!r} of this user never retrieved this skill: retrieve it with the session_id first."
        )
    now = timezone.now()
    uses.filter(applied_at__isnull=True).update(applied_at=now, updated_at=now)
    return {
        "skill_id": skill.pk,
        "session_id": session_id,
        "applied": uses.count(),
        "applied_at": min(uses.values_list("applied_at", flat=True)),
    }


def skill_feedback_record(
    *, skill: Skill, verdict: str, reason: str, client=None, actor: str = "", session=None
) -> SkillFeedback:
    """A verdict on the current version from a client (an agent) or a person (`actor`)."""
    return SkillFeedback.objects.create(
        organization_id=skill.organization_id,
        scope=skill.scope,
        skill=skill,
        version=skill.version,
        end_user_id=session.end_user_id if session is not None else None,
        session_id=session.session_id if session is not None else "",
        verdict=verdict,
        reason=reason,
        client=client,
        actor=actor or f"client:{client.name}",
    )
