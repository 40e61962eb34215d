"""The admin home page's counts of what needs a person: skills by status, pending experiences,
task sessions awaiting distillation and failed tasks, each with a link to the filtered list;
and whether beat and the workers are alive."""

from dataclasses import dataclass
from urllib.parse import urlencode

from django.db.models import Count
from django.urls import reverse

from apps.conversations.models import Session, SessionTag
from apps.pipeline.models import MemoryTask
from apps.pipeline.selectors import machinery_status
from apps.skills.models import Skill, SkillExperience


@dataclass
class Tile:
    label: str
    count: int | str  # a number, or a short text such as an age
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
    if user.has_perm("pipeline.view_memorytask"):
        groups.append(("Machinery", _machinery_tiles()))
    return groups


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def _machinery_tiles() -> list[Tile]:
    """Platform-wide, not per organisation: beat and workers serve every tenant."""
    status = machinery_status()
    beat, worker = status["beat"], status["worker"]
    return [
        Tile("Beat: last tick", _age(beat["age_seconds"]), reverse("admin:django_celery_beat_periodictask_changelist"),
             attention=beat["status"] != "ok"),
        Tile(f"Workers alive: {worker['alive']}, last heartbeat", _age(worker["age_seconds"]),
             reverse("admin:pipeline_processheartbeat_changelist"), attention=worker["status"] != "ok"),
    ]
