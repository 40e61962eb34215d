"""The skill memory types the search engine serves: `procedural` (skills) and `experience`."""

from apps.search.registry import SearchSource, register_source
from apps.skills.models import Skill, SkillExperience
from apps.skills.serializers import ExperienceOutputSerializer, SkillOutputSerializer
from apps.skills.trust import SHARED_SQL, TAUGHT_SQL

PROCEDURAL = SearchSource(
    memory_type="procedural",
    model=Skill,
    output=SkillOutputSerializer,
    item_fields=(
        "name",
        "description",
        "instructions",
        "triggers",
        "examples",
        "entry_type",
        "version",
        "status",
        "shared",
        "scope",
    ),
    default_method="hybrid",
    time_column="updated_at",
    user_column="end_user_id",
    shared_where=SHARED_SQL,
    user_where=TAUGHT_SQL,
    fuzzy_expression="(t.name || ' ' || t.description)",
    extra_where="t.status = 'active'",
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
    default_method="hybrid",
    time_column="created_at",
    user_column="end_user_id",
    session_column="session_id",
    fuzzy_expression="(t.title || ' ' || t.content)",
    embedding_text=SkillExperience.embedding_text,
)


def register_sources() -> None:
    register_source(PROCEDURAL)
    register_source(EXPERIENCE)
