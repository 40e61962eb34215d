"""The admin home page's counts of what needs a person: skills by status, pending experiences,
task sessions awaiting distillation and failed tasks, each with a link to the filtered list."""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.db.models import Count
from django.urls import reverse

from apps.conversations.models import Session, SessionTag
from apps.pipeline.models import MemoryTask
from apps.skills.models import Skill, SkillExperience


@dataclass
class Tile:
    label: str
    count: int
    url: str
    attention: bool = False


def _url(name: str, **params) -> str:
    url = reverse(name)
    return f"{url}?{urlencode(params)}" if params else url


def _scoped(queryset, organization):
    return queryset if organization is None else queryset.filter(organization=organization)


def dashboard_tiles(*, user, organization) -> list[tuple[str, list[Tile]]]:
    """Groups of tiles for what `user` may view; `organization` None means every organisation."""
    groups = []
    if user.has_perm("skills.view_skill"):
        by_status = dict(_scoped(Skill.objects, organization).values_list("status").annotate(n=Count("pk")).order_by())
        pending = by_status.get(Skill.Status.PENDING_REVIEW, 0)
        groups.append(("Skills", [
            Tile("Pending review", pending, reverse("admin:skills_skill_review_queue"), attention=pending > 0),
            *(
                Tile(label, by_status.get(status, 0), _url("admin:skills_skill_changelist", status__exact=status))
                for status, label in Skill.Status.choices if status != Skill.Status.PENDING_REVIEW
            ),
        ]))
    if user.has_perm("skills.view_skillexperience"):
        pending = _scoped(SkillExperience.objects, organization).filter(status=SkillExperience.Status.PENDING).count()
        groups.append(("Experiences", [
            Tile("Pending evolution", pending, _url("admin:skills_skillexperience_changelist", status__exact="pending")),
        ]))
    if user.has_perm("conversations.view_session"):
        awaiting = _scoped(Session.objects, organization).filter(
            session_tag=SessionTag.TASK, status=Session.Status.SEALED, distilled_at__isnull=True
        ).count()
        groups.append(("Sessions", [
            Tile(
                "Awaiting distillation", awaiting,
                _url(
                    "admin:conversations_session_changelist", session_tag__exact="task", status__exact="sealed",
                    distilled_at__isnull="True",
                ),
            ),
        ]))
    if user.has_perm("pipeline.view_memorytask"):
        by_status = dict(
            _scoped(MemoryTask.objects, organization)
            .filter(status__in=[MemoryTask.Status.FAILED, MemoryTask.Status.DEAD])
            .values_list("status").annotate(n=Count("pk")).order_by()
        )
        groups.append(("Tasks", [
            Tile(label, by_status.get(status, 0), _url("admin:pipeline_memorytask_changelist", status__exact=status),
                 attention=by_status.get(status, 0) > 0)
            for status, label in ((MemoryTask.Status.FAILED, "Failed, retrying"), (MemoryTask.Status.DEAD, "Dead"))
        ]))
    return groups
