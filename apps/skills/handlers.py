"""Pipeline handlers of skill memory: thin, they load by id and call a service."""

from apps.conversations.models import Session
from apps.conversations.routing import DISTILL_SESSION
from apps.core.errors import ConflictError
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import payload_row, register_handler
from apps.skills.services.distill import session_distill_locked
from apps.skills.services.evolve.run import EVOLVE_SKILLS, evolve_enqueue, skills_evolve_locked
from apps.skills.services.review import skills_review_effectiveness


@register_handler(DISTILL_SESSION, priority=MemoryTask.Priority.LEARN)
@payload_row("session", Session.objects.select_related("organization"), gone="session", experiences=0)
def handle_distill_session(task, session) -> dict:
    try:
        result = session_distill_locked(session=session, task=task)
    except ConflictError as exc:  # not a sealed task session: retrying would not change that
        return {"skipped": str(exc), "experiences": 0}
    result["sent_to_review"] = [str(skill.pk) for skill in skills_review_effectiveness(session=session)]
    return result


@register_handler(EVOLVE_SKILLS, priority=MemoryTask.Priority.URGENT)
def handle_evolve_skills(task) -> dict:
    organization, scope = task.organization, task.payload["scope"]
    result = skills_evolve_locked(organization=organization, scope=scope, task=task)
    if result["remaining"] and (result["consumed"] or result["superseded"]):
        result["follow_up_task"] = str(evolve_enqueue(organization=organization, scope=scope).pk)
    return result
