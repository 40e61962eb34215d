"""The skill memory types the search engine serves: `procedural` (skills) and `experience`."""

from django.db.models import Q

from apps.search.registry import SearchSource, register_source
from apps.skills.models import Skill, SkillExperience
from apps.skills.selectors import experience_visible, skill_served
from apps.skills.serializers import ExperienceOutputSerializer, SkillOutputSerializer
from apps.skills.services.skills import CONTENT_FIELDS

PROCEDURAL = SearchSource(
    memory_type="procedural",
    model=Skill,
    output=SkillOutputSerializer,
    item_fields=(*CONTENT_FIELDS, "version", "status", "shared", "scope"),
    # A user is served the shared skills and those they own or taught (apps.skills.trust): the rule
    # takes the user, rather than the owner filter of `user_column`.
    visible=skill_served,
    text=lambda skill: f"{skill.name}: {skill.description}",
    served=Q(status=Skill.Status.ACTIVE),
    default_method="hybrid",
    time_column="updated_at",
    user_column=None,
    fuzzy_fields=("name", "description"),
    embedding_text=Skill.embedding_text,
)

EXPERIENCE = SearchSource(
    memory_type="experience",
    model=SkillExperience,
    output=ExperienceOutputSerializer,
    item_fields=(
        "title",
        "content",
        "experience_type",
        "importance",
        "credibility",
        "evidence",
        "status",
        "scope",
        "created_at",
    ),
    visible=experience_visible,
    text=lambda experience: f"{experience.title}: {experience.content}",
    default_method="hybrid",
    time_column="created_at",
    user_column="end_user_id",
    session_column="session_id",
    fuzzy_fields=("title", "content"),
    embedding_text=SkillExperience.embedding_text,
)


def register_sources() -> None:
    register_source(PROCEDURAL)
    register_source(EXPERIENCE)
