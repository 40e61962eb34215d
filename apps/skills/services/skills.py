"""Writes of skills. Every change is a SkillVersion with the full snapshot, the actor, a reason
and the experiences that caused it."""

import itertools
import re

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from apps.core.events import SKILL_EVOLVED, SKILL_REVIEW_NEEDED, emit_event
from apps.core.validation import check_fields
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.skills.models import SKILL_NAME_MAX_LENGTH, Skill, SkillVersion
from apps.skills.trust import corroborated, teachers

# What a skill says (its text and kind): edited, versioned and served alike.
CONTENT_FIELDS = ("name", "description", "instructions", "triggers", "examples", "entry_type")
SNAPSHOT_FIELDS = (*CONTENT_FIELDS, "status", "shared", "scope", "action_signature")
EDITABLE_FIELDS = (*CONTENT_FIELDS, "action_signature")


def skill_slug(text: str) -> str:
    slug = slugify(re.sub(r"[_\s]+", "-", text or ""))[:SKILL_NAME_MAX_LENGTH].strip("-")
    return slug or "skill"


def skill_snapshot(skill: Skill) -> dict:
    return {
        **{name: getattr(skill, name) for name in SNAPSHOT_FIELDS},
        "end_user": skill.end_user.user_id if skill.end_user_id else None,
        "version": skill.version,
    }


# SKILL_REVIEW_MODE: `auto` puts evolved skills live; `manual` holds them in pending_review.
REVIEW_MODES = ("auto", "manual")


def evolved_status() -> str:
    return Skill.Status.PENDING_REVIEW if settings.SKILL_REVIEW_MODE == "manual" else Skill.Status.ACTIVE


def _unique_name(*, organization, scope: str, name: str, exclude_pk=None) -> str:
    taken = set(
        Skill.objects.filter(organization=organization, scope=scope, name__startswith=name[: SKILL_NAME_MAX_LENGTH - 4])
        .exclude(status=Skill.Status.ARCHIVED)
        .exclude(pk=exclude_pk)
        .values_list("name", flat=True)
    )
    if name not in taken:
        return name
    for number in itertools.count(2):
        suffix = f"-{number}"
        candidate = name[: SKILL_NAME_MAX_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate


def _embed(skill: Skill, vector: list | None = None) -> None:
    """`vector` when the caller embedded the text before its transaction."""
    (skill.embedding,) = [vector] if vector is not None else embed_texts([skill.embedding_text()])
    skill.embedding_model = embedding_model_name()


def _record(skill: Skill, *, operation: str, actor: str, reason: str, experiences=()) -> SkillVersion:
    version = SkillVersion.objects.create(
        skill=skill,
        version=skill.version,
        operation=operation,
        snapshot=skill_snapshot(skill),
        actor=actor,
        reason=reason,
    )
    if experiences:
        version.experiences.add(*experiences)
    return version


@transaction.atomic
def skill_create(
    *,
    organization,
    scope: str,
    fields: dict,
    actor: str,
    reason: str,
    experiences=(),
    status: str | None = None,
    end_user=None,
    embedding: list | None = None,
    shared: bool | None = None,
) -> Skill:
    """One learned from experiences is shared once its teachers corroborate it (apps.skills.trust);
    one without (a person's or an import's) is shared unless it has an end user."""
    check_fields({name: value for name, value in fields.items() if name in EDITABLE_FIELDS})
    taught_by = teachers(experiences)
    if shared is None:
        shared = end_user is None and (not taught_by or corroborated(taught_by))
    skill = Skill(
        organization=organization,
        scope=scope,
        end_user=end_user,
        status=status or evolved_status(),
        version=1,
        supporters=sorted(taught_by),
        shared=shared,
    )
    for name in EDITABLE_FIELDS:
        if name in fields:
            setattr(skill, name, fields[name])
    skill.name = _unique_name(organization=organization, scope=scope, name=skill_slug(skill.name))
    _embed(skill, embedding)
    skill.save()
    _record(skill, operation=SkillVersion.Operation.CREATE, actor=actor, reason=reason, experiences=experiences)
    return skill


@transaction.atomic
def skill_update(
    *,
    skill: Skill,
    changes: dict,
    actor: str,
    reason: str,
    experiences=(),
    status: str | None = None,
    operation: str = SkillVersion.Operation.EDIT,
    embedding: list | None = None,
    shared: bool | None = None,
) -> Skill:
    """A new version, or nothing when nothing changes; once its supporters corroborate it, it is shared."""
    changed = {
        name: value for name, value in changes.items() if name in EDITABLE_FIELDS and getattr(skill, name) != value
    }
    check_fields(changed)
    supporters = sorted(set(skill.supporters) | teachers(experiences))
    if shared is None:
        shared = skill.shared or (skill.end_user_id is None and corroborated(supporters))
    if (
        not changed
        and (status is None or status == skill.status)
        and shared == skill.shared
        and supporters == sorted(skill.supporters)
    ):
        return skill
    skill.supporters = supporters
    if shared and not skill.shared and operation == SkillVersion.Operation.EDIT and not changed:
        operation = SkillVersion.Operation.SHARE
    skill.shared = shared
    for name, value in changed.items():
        setattr(skill, name, value)
    if "name" in changed:
        skill.name = _unique_name(
            organization=skill.organization, scope=skill.scope, name=skill_slug(skill.name), exclude_pk=skill.pk
        )
    if status is not None:
        skill.status = status
    if {"description", "instructions"} & set(changed):
        _embed(skill, embedding)
    skill.version += 1
    skill.save()
    _record(skill, operation=operation, actor=actor, reason=reason, experiences=experiences)
    return skill


def skill_archive(*, skill: Skill, actor: str, reason: str, experiences=()) -> Skill:
    """Archiving is the only way evolution retires a skill: recorded, reversible, never silent."""
    return skill_update(
        skill=skill,
        changes={},
        actor=actor,
        reason=reason,
        experiences=experiences,
        status=Skill.Status.ARCHIVED,
        operation=SkillVersion.Operation.ARCHIVE,
    )


@transaction.atomic
def skill_return_to_review(*, skill: Skill, changes: dict, actor: str, reason: str) -> Skill:
    """A recorded version even when no text changes (e.g. a source was erased); archived stays archived."""
    status = Skill.Status.ARCHIVED if skill.status == Skill.Status.ARCHIVED else Skill.Status.PENDING_REVIEW
    version = skill.version
    skill = skill_update(skill=skill, changes=changes, actor=actor, reason=reason, status=status)
    if skill.version == version:
        skill.version += 1
        skill.save(update_fields=["version", "updated_at"])
        _record(skill, operation=SkillVersion.Operation.EDIT, actor=actor, reason=reason)
    skill_announce(skill=skill)
    return skill


SKILL_EVENTS = {Skill.Status.ACTIVE: SKILL_EVOLVED, Skill.Status.PENDING_REVIEW: SKILL_REVIEW_NEEDED}


def skill_announce(*, skill: Skill) -> None:
    """Tells the webhooks of a version evolution or outcomes made; call it in the transaction that stores it."""
    event_type = SKILL_EVENTS.get(skill.status)
    if event_type is None:
        return
    emit_event(
        event_type,
        organization_id=skill.organization_id,
        data={"skill_id": str(skill.pk), "scope": skill.scope, "version": skill.version, "status": skill.status},
    )


def skill_event_content(*, organization_id, data: dict) -> dict | None:
    """A skill event's content (for endpoints that opted in): the skill as it is now, None once it is gone."""
    skill = Skill.objects.filter(organization_id=organization_id, pk=data["skill_id"]).first()
    if skill is None:
        return None
    return {name: getattr(skill, name) for name in ("name", "description", "instructions", "triggers", "version")}


def skill_delete(*, skill: Skill) -> None:
    """The skill and its history go; its experiences stay."""
    skill.delete()
