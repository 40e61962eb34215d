"""The skill endpoints' operations (REST: apps.skills.views; MCP: apps.mcp_server)."""

from apps.conversations.operations import session_named
from apps.core.operations import (
    Access,
    Page,
    check_ids,
    get_or_404,
    operation,
    paginate,
    require_write_access,
    validated,
)
from apps.core.pagination import DEFAULT_LIMIT
from apps.skills import selectors
from apps.skills.serializers import (
    DistillOutputSerializer,
    ExperienceListFilterSerializer,
    ExperienceOutputSerializer,
    RetrievedSkillSerializer,
    SkillDetailOutputSerializer,
    SkillListFilterSerializer,
    SkillOutputSerializer,
    SkillRetrieveInputSerializer,
)
from apps.skills.services.distill import distill_request
from apps.skills.services.retrieve import skills_retrieve
from apps.skills.services.skills import skill_delete


@operation()  # a retrieval reads, even as a POST: read-only clients may call it
def retrieve_skills(*, client, data) -> dict:
    """Retrieve the top-k active skills for a task.

    Hybrid search over name, description, triggers and instructions of the skills in the caller's
    read scopes: the scope's shared skills and, with `user_id`, that user's own. Call it before acting."""
    retrieval = validated(SkillRetrieveInputSerializer, data)
    hits = skills_retrieve(
        reader=client.reader, task=retrieval["task"], k=retrieval["k"], user_id=retrieval.get("user_id")
    )
    for skill, score in hits:
        skill.score = score
    return {"task": retrieval["task"], "skills": RetrievedSkillSerializer([skill for skill, _ in hits], many=True).data}


@operation()
def list_skills(*, client, query) -> Page:
    """List skills, most retrieved first; archived ones only when asked for by `status`."""
    filters = validated(SkillListFilterSerializer, query)
    skills = selectors.skill_list(reader=client.reader, filters=filters)
    return paginate(skills, filters=filters, serializer_class=SkillOutputSerializer, default_limit=DEFAULT_LIMIT)


@operation()
def get_skill(*, client, skill_id: str) -> dict:
    """Read a skill with its version history (each version's snapshot and source experiences)."""
    check_ids(skill_id=skill_id)
    return SkillDetailOutputSerializer(
        get_or_404(selectors.skill_detail_queryset(reader=client.reader), pk=skill_id)
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
    filters = validated(ExperienceListFilterSerializer, query)
    experiences = selectors.experience_list(reader=client.reader, filters=filters)
    return paginate(
        experiences, filters=filters, serializer_class=ExperienceOutputSerializer, default_limit=DEFAULT_LIMIT
    )


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
