"""apps/skills/services/review.py: each decision is a version naming the person."""

import pytest

from apps.core.errors import ConflictError
from apps.skills.models import Skill, SkillVersion
from apps.skills.services.review import (
    skill_approve,
    skill_archive_by_person,
    skill_edit_by_person,
    skill_reject,
)
from tests.admin.makers import pending_skill

pytestmark = pytest.mark.django_db


def latest(skill) -> SkillVersion:
    return skill.versions.order_by("-version").first()


def test_approve_makes_a_pending_skill_active_as_a_new_version(organization):
    skill = skill_approve(skill=pending_skill(organization, "rebook"), actor="admin:ann", reason="looks right")
    skill.refresh_from_db()
    version = latest(skill)
    assert (skill.status, skill.version) == ("active", 2)
    assert (version.operation, version.actor, version.reason) == ("approve", "admin:ann", "looks right")
    assert version.snapshot["status"] == "active"


def test_reject_archives_with_the_reason_and_needs_one(organization):
    skill = pending_skill(organization, "refund")
    with pytest.raises(ConflictError):
        skill_reject(skill=skill, actor="admin:ann", reason="  ")
    skill_reject(skill=skill, actor="admin:ann", reason="Refunds need a supervisor.")
    skill.refresh_from_db()
    assert skill.status == "archived"
    assert (latest(skill).operation, latest(skill).reason) == ("reject", "Refunds need a supervisor.")


def test_only_pending_skills_are_approved_or_rejected(organization):
    skill = skill_approve(skill=pending_skill(organization, "cancel"), actor="admin:ann")
    with pytest.raises(ConflictError):
        skill_approve(skill=skill, actor="admin:ann")
    with pytest.raises(ConflictError):
        skill_reject(skill=skill, actor="admin:ann", reason="no")
    assert skill.versions.count() == 2


def test_archive_records_the_person_and_refuses_an_archived_skill(organization):
    skill = skill_archive_by_person(skill=pending_skill(organization, "upgrade"), actor="admin:bob")
    assert (skill.status, latest(skill).operation, latest(skill).actor) == ("archived", "archive", "admin:bob")
    with pytest.raises(ConflictError):
        skill_archive_by_person(skill=skill, actor="admin:bob")


def test_an_edit_by_a_person_is_a_version_and_an_empty_edit_is_nothing(organization):
    skill = pending_skill(organization, "seat-change")
    skill = skill_edit_by_person(
        skill=skill, changes={"description": "Change a seat on a booked flight."}, actor="admin:ann", reason="clearer"
    )
    assert (skill.version, latest(skill).operation, latest(skill).actor) == (2, "edit", "admin:ann")
    assert Skill.objects.get(pk=skill.pk).description == "Change a seat on a booked flight."
    skill_edit_by_person(skill=skill, changes={"description": "Change a seat on a booked flight."}, actor="admin:ann")
    assert skill.versions.count() == 2
    with pytest.raises(ConflictError):
        skill_edit_by_person(skill=skill, changes={"status": "active"}, actor="admin:ann")
