"""A person's curation of skills: approve, reject, share, archive and edit, each recorded as a
SkillVersion that names the person; and of the lessons held for corroboration or flagged."""

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from apps.core.errors import ConflictError
from apps.skills.effectiveness import review_evidence
from apps.skills.models import Skill, SkillExperience, SkillUse, SkillVersion
from apps.skills.services.evolve.run import evolve_enqueue
from apps.skills.services.skills import (
    EDITABLE_FIELDS,
    skill_archive,
    skill_return_to_review,
    skill_update,
)


def person_actor(user) -> str:
    return f"admin:{user.get_username()}"


def _require_pending_review(skill: Skill, done: str) -> None:
    if skill.status != Skill.Status.PENDING_REVIEW:
        raise ConflictError(
            f"{skill.name} is {skill.get_status_display().lower()}; only skills pending review are {done}."
        )


def skill_approve(*, skill: Skill, actor: str, reason: str = "") -> Skill:
    """A person's approval stands in for corroboration by other end users (a user's own skill stays theirs)."""
    _require_pending_review(skill, "approved")
    return skill_update(
        skill=skill,
        changes={},
        actor=actor,
        reason=reason or "Approved.",
        status=Skill.Status.ACTIVE,
        operation=SkillVersion.Operation.APPROVE,
        shared=skill.end_user_id is None,
    )


def skill_share_by_person(*, skill: Skill, actor: str, reason: str = "") -> Skill:
    if skill.status == Skill.Status.ARCHIVED:
        raise ConflictError(f"{skill.name} is archived; restore it before sharing it.")
    if skill.end_user_id is not None:
        raise ConflictError(f"{skill.name} is one user's own skill; it is not shared.")
    if skill.shared:
        raise ConflictError(f"{skill.name} is already shared.")
    return skill_update(
        skill=skill,
        changes={},
        actor=actor,
        reason=reason or "Shared by a person.",
        shared=True,
        operation=SkillVersion.Operation.SHARE,
    )


def skill_reject(*, skill: Skill, actor: str, reason: str) -> Skill:
    """Archived, not deleted, so the decision stays on record."""
    _require_pending_review(skill, "rejected")
    if not reason.strip():
        raise ConflictError("A rejection needs a reason.")
    return skill_update(
        skill=skill,
        changes={},
        actor=actor,
        reason=reason.strip(),
        status=Skill.Status.ARCHIVED,
        operation=SkillVersion.Operation.REJECT,
    )


def skill_archive_by_person(*, skill: Skill, actor: str, reason: str = "") -> Skill:
    if skill.status == Skill.Status.ARCHIVED:
        raise ConflictError(f"{skill.name} is already archived.")
    return skill_archive(skill=skill, actor=actor, reason=reason or "Archived by a person.")


def skill_edit_by_person(*, skill: Skill, changes: dict, actor: str, reason: str = "") -> Skill:
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ConflictError(f"These fields are not editable: {', '.join(sorted(unknown))}.")
    return skill_update(skill=skill, changes=changes, actor=actor, reason=reason or "Edited by a person.")


def _require_held_or_flagged(experience: SkillExperience, done: str) -> None:
    if experience.status not in (SkillExperience.Status.HELD, SkillExperience.Status.FLAGGED):
        raise ConflictError(
            f"{experience.title} is {experience.get_status_display().lower()}; only held or flagged lessons are {done}."
        )


def experience_approve(*, experience: SkillExperience, actor: str) -> SkillExperience:
    """The lesson evolves as if enough end users had taught it, at the next evolution of its scope."""
    _require_held_or_flagged(experience, "approved")
    experience.status = SkillExperience.Status.PENDING
    experience.approved_by = actor
    experience.save(update_fields=["status", "approved_by", "updated_at"])
    transaction.on_commit(lambda: evolve_enqueue(organization=experience.organization, scope=experience.scope))
    return experience


def experience_reject(*, experience: SkillExperience, actor: str) -> SkillExperience:
    _require_held_or_flagged(experience, "rejected")
    experience.status = SkillExperience.Status.SUPERSEDED
    experience.save(update_fields=["status", "updated_at"])
    return experience


EFFECTIVENESS_ACTOR = "review:effectiveness"


def skills_review_effectiveness(*, session) -> list[Skill]:
    """Sends to review each active skill the sealed `session` counts for whose evidence now says it
    hurts (Evidence.harmful); nothing is deleted: a person approves it back or rejects it."""
    skills = Skill.objects.filter(
        status=Skill.Status.ACTIVE,
        scope=session.scope,
        pk__in=SkillUse.objects.filter(
            Q(rank__lte=settings.SKILL_EVIDENCE_TOP_RANKS) | Q(applied_at__isnull=False),
            organization_id=session.organization_id,
            end_user_id=session.end_user_id,
            session_scope=session.scope,
            session_id=session.session_id,
        ).values("skill_id"),
    ).select_related("organization", "end_user")
    sent = []
    for skill in skills:
        evidence, _ = review_evidence(skill)
        if evidence.harmful():
            reason = f"Sent to review by its outcomes: {evidence.summary()}"
            sent.append(skill_return_to_review(skill=skill, changes={}, actor=EFFECTIVENESS_ACTOR, reason=reason))
    return sent


def skills_review_reassess(*, organization) -> list[Skill]:
    """After an erasure took evidence away: a skill sent to review only by what the erased user did is
    active again; one a person or an erasure touched since waits for a person."""
    held = Skill.objects.filter(
        organization=organization,
        status=Skill.Status.PENDING_REVIEW,
        versions__version=F("version"),
        versions__actor=EFFECTIVENESS_ACTOR,
    ).select_related("organization", "end_user")
    restored = []
    for skill in held:
        evidence, _ = review_evidence(skill)
        if evidence.harmful():
            continue
        reason = (
            f"Back in service: the evidence that sent it to review no longer holds ({evidence.users} users' "
            "outcomes in its review window after an erasure)."
        )
        restored.append(
            skill_update(skill=skill, changes={}, actor=EFFECTIVENESS_ACTOR, reason=reason, status=Skill.Status.ACTIVE)
        )
    return restored
