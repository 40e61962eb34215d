"""The skill endpoints' operations (REST: apps.skills.views; MCP: apps.mcp_server)."""

from django.conf import settings

from apps.conversations.operations import session_named
from apps.core.errors import InvalidInput
from apps.core.operations import (
    Access,
    check_ids,
    get_or_404,
    operation,
    require_write_access,
    validated,
)
from apps.core.pagination import Page, paginated_read
from apps.skills import selectors
from apps.skills.changes import cascade_experience_delete
from apps.skills.effectiveness import skill_effectiveness
from apps.skills.models import SkillExperience
from apps.skills.serializers import (
    DistillOutputSerializer,
    ExperienceListFilterSerializer,
    ExperienceOutputSerializer,
    RetrievedSkillSerializer,
    SkillDetailOutputSerializer,
    SkillFeedbackInputSerializer,
    SkillFeedbackOutputSerializer,
    SkillListFilterSerializer,
    SkillOutputSerializer,
    SkillRetrieveInputSerializer,
    SkillUseInputSerializer,
    SkillUseOutputSerializer,
)
from apps.skills.services.distill import distill_request
from apps.skills.services.feedback import skill_feedback_record, skill_uses_apply
from apps.skills.services.retrieve import skills_retrieve
from apps.skills.services.skills import skill_delete


@operation()  # a retrieval reads, even as a POST: read-only clients may call it
def retrieve_skills(*, client, data) -> dict:
    """Retrieve the top-k active skills for a task.

    Hybrid search over name, description, triggers and instructions of the skills in the caller's
    read scopes: the scope's shared skills and, with `user_id`, that user's own. Call it before acting.
    Each skill's relevance is multiplied by a bounded effectiveness factor (its reason is shown); with
    `session_id` (and `user_id`) every skill returned is recorded as a use of that task session, whose
    outcome, once sealed, counts for or against the skills of its scope at the top ranks
    (SKILL_EVIDENCE_TOP_RANKS) and those marked applied, one outcome per end user."""
    retrieval = validated(SkillRetrieveInputSerializer, data)
    ranked = skills_retrieve(
        client=client,
        task=retrieval["task"],
        k=retrieval["k"],
        user_id=retrieval.get("user_id"),
        session_id=retrieval.get("session_id"),
    )
    for retrieved in ranked:
        skill = retrieved.skill
        skill.score, skill.relevance = retrieved.score, retrieved.relevance
        skill.effectiveness_factor = retrieved.adjustment.factor
        skill.effectiveness_reason = retrieved.adjustment.reason
    return {
        "task": retrieval["task"],
        "session_id": retrieval.get("session_id"),
        "effectiveness_weight": settings.SKILL_EFFECTIVENESS_WEIGHT,
        "skills": RetrievedSkillSerializer([retrieved.skill for retrieved in ranked], many=True).data,
    }


@operation()
def list_skills(*, client, query) -> Page:
    """List skills, most retrieved first; archived ones only when asked for by `status`."""
    return paginated_read(
        client, query, filters=SkillListFilterSerializer, select=selectors.skill_list, output=SkillOutputSerializer
    )


@operation()
def get_skill(*, client, skill_id: str) -> dict:
    """Read a skill with its version history and its effectiveness.

    `versions`: each version's snapshot and source experiences. `effectiveness`: its uses, the
    outcomes of the task sessions that retrieved it, the success rate with a Wilson interval and the
    lift against the scope's other task sessions with a Newcombe interval, overall and per version,
    and the feedback it received."""
    check_ids(skill_id=skill_id)
    skill = get_or_404(selectors.skill_detail_queryset(reader=client.reader), pk=skill_id)
    skill.effectiveness = skill_effectiveness(skill)
    return SkillDetailOutputSerializer(skill).data


@operation(access=Access.WRITE)
def apply_skill(*, client, skill_id: str, data) -> dict:
    """Report that the agent followed a skill it retrieved in a task session.

    Marks the skill's uses in that session (of `user_id`, in the client's write scope) as applied;
    409 when the session never retrieved the skill."""
    check_ids(skill_id=skill_id)
    use = validated(SkillUseInputSerializer, data)
    skill = get_or_404(selectors.skill_writable_queryset(reader=client.reader), pk=skill_id)
    return SkillUseOutputSerializer(
        skill_uses_apply(skill=skill, client=client, user_id=use["user_id"], session_id=use["session_id"])
    ).data


@operation(access=Access.WRITE)
def skill_feedback(*, client, skill_id: str, data) -> dict:
    """Give a verdict on a skill for a task session: `helped`, `hurt` or `irrelevant`, with a reason.

    `session_id` names a session of `user_id` the client reads (400 naming `session_id` otherwise).
    Recorded with the client as its actor; the skill's effectiveness counts it."""
    check_ids(skill_id=skill_id)
    feedback = validated(SkillFeedbackInputSerializer, data)
    skill = get_or_404(selectors.skill_writable_queryset(reader=client.reader), pk=skill_id)
    session = selectors.feedback_session(
        reader=client.reader,
        skill=skill,
        user_id=feedback["user_id"],
        session_id=feedback["session_id"],
        write_scope=client.write_scope,
    )
    if session is None:
        raise InvalidInput({"session_id": ["This user has no session with this id in your read scopes."]})
    return SkillFeedbackOutputSerializer(
        skill_feedback_record(
            skill=skill, client=client, session=session, verdict=feedback["verdict"], reason=feedback["reason"]
        )
    ).data


@operation(access=Access.WRITE)
def delete_skill(*, client, item_id: str) -> None:
    """Delete a skill and its versions for good."""
    check_ids(item_id=item_id)
    skill = get_or_404(selectors.skill_writable_queryset(reader=client.reader), pk=item_id)
    require_write_access(client, skill)
    skill_delete(skill=skill)


@operation()
def list_experiences(*, client, query) -> Page:
    """List skill experiences (lessons distilled from task sessions), newest first."""
    return paginated_read(
        client,
        query,
        filters=ExperienceListFilterSerializer,
        select=selectors.experience_list,
        output=ExperienceOutputSerializer,
    )


@operation(access=Access.WRITE)
def delete_experience(*, client, experience_id: str) -> None:
    """Delete a skill experience.

    A skill evolved from it alone goes too; one with other sources is scrubbed and returned to review."""
    check_ids(experience_id=experience_id)
    experience = get_or_404(client.reader.rows(SkillExperience).select_related("organization"), pk=experience_id)
    require_write_access(client, experience)
    cascade_experience_delete(experience=experience)


@operation(access=Access.WRITE)
def distill_session(*, client, session_id: str, query) -> dict:
    """Distil a sealed task session now.

    Queues the same idempotent task sealing queues; 409 for a conversation session, an open one, or
    one already distilled."""
    session, _ = session_named(client=client, session_id=session_id, query=query)
    require_write_access(client, session)
    task = distill_request(session=session, client=client)
    return DistillOutputSerializer(
        {"session_id": session.session_id, "task_id": task.pk, "task_status": task.status}
    ).data
