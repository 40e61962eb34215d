"""A person's curation of skills: approve, reject, archive and edit, each recorded as a SkillVersion
that names the person."""

from apps.core.errors import ConflictError
from apps.skills.models import Skill, SkillVersion
from apps.skills.services.skills import EDITABLE_FIELDS, skill_archive, skill_update


def person_actor(user) -> str:
    """How a person appears in a version's `actor`, next to "evolution:rules" and friends."""
    return f"admin:{user.get_username()}"


def skill_approve(*, skill: Skill, actor: str, reason: str = "") -> Skill:
    """Makes a skill held for review live."""
    if skill.status != Skill.Status.PENDING_REVIEW:
        raise ConflictError(f"{skill.name} is {skill.get_status_display().lower()}; only skills pending review are approved.")
    return skill_update(
        skill=skill, changes={}, actor=actor, reason=reason or "Approved.", status=Skill.Status.ACTIVE,
        operation=SkillVersion.Operation.APPROVE,
    )


def skill_reject(*, skill: Skill, actor: str, reason: str) -> Skill:
    """Turns down a skill held for review; it is archived, not deleted, so the decision stays on record."""
    if skill.status != Skill.Status.PENDING_REVIEW:
        raise ConflictError(f"{skill.name} is {skill.get_status_display().lower()}; only skills pending review are rejected.")
    if not reason.strip():
        raise ConflictError("A rejection needs a reason.")
    return skill_update(
        skill=skill, changes={}, actor=actor, reason=reason.strip(), status=Skill.Status.ARCHIVED,
        operation=SkillVersion.Operation.REJECT,
    )


def skill_archive_by_person(*, skill: Skill, actor: str, reason: str = "") -> Skill:
    """Retires a live skill; it is no longer retrieved but its history stays."""
    if skill.status == Skill.Status.ARCHIVED:
        raise ConflictError(f"{skill.name} is already archived.")
    return skill_archive(skill=skill, actor=actor, reason=reason or "Archived by a person.")


def skill_edit_by_person(*, skill: Skill, changes: dict, actor: str, reason: str = "") -> Skill:
    """A person's edit of the skill's text; an edit that changes nothing stores nothing."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ConflictError(f"These fields are not editable: {', '.join(sorted(unknown))}.")
    return skill_update(skill=skill, changes=changes, actor=actor, reason=reason or "Edited by a person.")
