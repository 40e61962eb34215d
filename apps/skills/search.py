"""The skill memory types the search engine serves: `procedural` (skills) and `experience`."""

from apps.search.registry import SearchSource, register_source
from apps.skills.models import Skill, SkillExperience
from apps.skills.trust import SHARED_SQL, TAUGHT_SQL


def skill_item(skill: Skill) -> dict:
    return {
        "name": skill.name,
        "description": skill.description,
        "instructions": skill.instructions,
        "triggers": skill.triggers,
        "examples": skill.examples,
        "entry_type": skill.entry_type,
        "version": skill.version,
        "status": skill.status,
        "shared": skill.shared,
        "scope": skill.scope,
    }


def experience_item(experience: SkillExperience) -> dict:
    return {
        "title": experience.title,
        "content": experience.content,
        "experience_type": experience.experience_type,
        "importance": experience.importance,
        "credibility": experience.credibility,
        "evidence": experience.evidence,
        "status": experience.status,
        "scope": experience.scope,
        "created_at": experience.created_at.isoformat(),
    }


PROCEDURAL = SearchSource(
    memory_type="procedural",
    model=Skill,
    to_item=skill_item,
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
    to_item=experience_item,
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
