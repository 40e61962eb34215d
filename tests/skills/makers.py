"""Makers of searchable skill-memory items for the search scope matrix (tests/search/makers.py format)."""

from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.skills.models import SkillExperience
from apps.skills.services.skills import skill_create
from apps.tenancy.services import end_user_get_or_create


def make_skill(client, user_id, text, add_messages=None):
    """A shared, active skill in the client's write scope whose name and description are `text`."""
    return skill_create(
        organization=client.organization,
        scope=client.write_scope,
        fields={"name": text, "description": text, "instructions": text, "entry_type": "guide"},
        actor="test",
        reason="search scope matrix",
        status="active",
    )


def make_experience(client, user_id, text, add_messages=None):
    (vector,) = embed_texts([text])
    return SkillExperience.objects.create(
        organization=client.organization,
        scope=client.write_scope,
        end_user=end_user_get_or_create(organization=client.organization, user_id=user_id),
        created_by=client,
        experience_type="worth_learning",
        title=text[:120],
        content=text,
        evidence={"quote": text, "signal_type": "inferred"},
        embedding=vector,
        embedding_model=embedding_model_name(),
    )


MAKERS = {"procedural": make_skill, "experience": make_experience}
