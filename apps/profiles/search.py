"""Compiled pages as memory types of the one search engine: a person's page (`profile`) and a
topic's page (`topic`), two kinds of one table, each with its own cap in a mixed search."""

from django.conf import settings

from apps.profiles.models import Profile
from apps.search.registry import SearchSource, register_source


def profile_item(profile: Profile) -> dict:
    return {
        "name": profile.name,
        "markdown": profile.markdown,
        "revision": profile.revision,
        "entity_id": str(profile.entity_id) if profile.entity_id else None,
        # What the page quotes, so a caller can cite the turns and memories behind a hit.
        "sources": profile.source_refs,
        "user_id": profile.end_user.user_id,
        "scope": profile.scope,
        "compiled_at": profile.compiled_at,
        "created_at": profile.created_at,
        "updated_at": profile.updated_at,
    }


PROFILE_SOURCE = SearchSource(
    memory_type="profile",
    model=Profile,
    to_item=profile_item,
    default_method="hybrid",
    time_column="compiled_at",
    user_column="end_user_id",
    fuzzy_expression="(t.name || ' ' || t.markdown)",
    extra_where="t.status = 'active' AND t.kind = 'person'",
    select_related=("end_user",),
    embedding_text=Profile.embedding_text,
    mixed_cap=lambda: settings.SEARCH_PROFILE_HITS,
    rows=(("kind", Profile.Kind.PERSON.value),),
)
TOPIC_SOURCE = SearchSource(
    memory_type="topic",
    model=Profile,
    to_item=profile_item,
    default_method="hybrid",
    time_column="compiled_at",
    user_column="end_user_id",
    fuzzy_expression="(t.name || ' ' || t.markdown)",
    extra_where="t.status = 'active' AND t.kind = 'topic'",
    select_related=("end_user",),
    embedding_text=Profile.embedding_text,
    mixed_cap=lambda: settings.SEARCH_TOPIC_HITS,
    rows=(("kind", Profile.Kind.TOPIC.value),),
)


def register_sources() -> None:
    register_source(PROFILE_SOURCE)
    register_source(TOPIC_SOURCE)
