"""The admin home page's skill cards, the action this app adds to the sessions' admin and what it lists on an end
user's page (core.extensions)."""

from django.contrib import admin, messages
from django.db.models import Count
from django.urls import reverse

from apps.core.errors import ConflictError
from apps.core.extensions import (
    Tile,
    admin_url,
    holding,
    of_organization,
    register_admin_action,
    register_admin_holdings,
    register_dashboard_card,
)
from apps.skills.models import Skill, SkillExperience
from apps.skills.selectors import skills_of_end_user
from apps.skills.services.distill import distill_request


def skills_card(*, user, organization):
    if not user.has_perm("skills.view_skill"):
        return None
    by_status = dict(
        of_organization(Skill.objects, organization).values_list("status").annotate(n=Count("pk")).order_by()
    )
    pending = by_status.get(Skill.Status.PENDING_REVIEW, 0)
    return (
        "Skills",
        [
            Tile("Pending review", pending, reverse("admin:skills_skill_review_queue"), attention=pending > 0),
            *(
                Tile(label, by_status.get(status, 0), admin_url("admin:skills_skill_changelist", status__exact=status))
                for status, label in Skill.Status.choices
                if status != Skill.Status.PENDING_REVIEW
            ),
        ],
    )


def experiences_card(*, user, organization):
    if not user.has_perm("skills.view_skillexperience"):
        return None
    pending = (
        of_organization(SkillExperience.objects, organization).filter(status=SkillExperience.Status.PENDING).count()
    )
    url = admin_url("admin:skills_skillexperience_changelist", status__exact="pending")
    return "Experiences", [Tile("Pending evolution", pending, url)]


@admin.action(description="Distil now (sealed task sessions)", permissions=["change"])
def distill_now(modeladmin, request, queryset):
    queued = 0
    for session in queryset:
        try:
            distill_request(session=session)
            queued += 1
        except ConflictError as exc:
            modeladmin.message_user(request, str(exc), messages.WARNING)
    if queued:
        modeladmin.message_user(request, f"Queued distillation of {queued} session(s).", messages.SUCCESS)


def end_user_skills(end_user) -> list:
    return [
        holding(
            "Skills they support or taught",
            skills_of_end_user(end_user=end_user).order_by("name"),
            label=lambda skill: f"{skill.name} ({skill.status})",
        ),
        holding(
            "Skill experiences",
            SkillExperience.objects.filter(end_user=end_user).order_by("-created_at"),
            label=lambda experience: experience.title[:80],
            filters={"end_user": end_user.pk},
        ),
    ]


register_dashboard_card(skills_card, order=10)
register_dashboard_card(experiences_card, order=20)
register_admin_action("conversations.Session", distill_now)
register_admin_holdings("tenancy.EndUser", end_user_skills)
