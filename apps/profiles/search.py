"""Profiles as a memory type of the one search engine (`memory_types: ["profile"]`)."""

from django.conf import settings

from apps.profiles.models import Profile
from apps.profiles.serializers import ProfileOutputSerializer
from apps.search.registry import SearchSource, register_source

PROFILE_SOURCE = SearchSource(
    memory_type="profile",
    model=Profile,
    output=ProfileOutputSerializer,
    # `sources`: what the page quotes, so a caller can cite the turns and memories behind a hit.
    item_fields=(
        "name",
        "markdown",
        "revision",
        "entity_id",
        "sources",
        "user_id",
        "scope",
        "compiled_at",
        "created_at",
        "updated_at",
    ),
    default_method="hybrid",
    time_column="compiled_at",
    user_column="end_user_id",
    fuzzy_expression="(t.name || ' ' || t.markdown)",
    extra_where="t.status = 'active'",
    select_related=("end_user",),
    embedding_text=Profile.embedding_text,
    mixed_cap=lambda: settings.SEARCH_PROFILE_HITS,
)


def register_sources() -> None:
    register_source(PROFILE_SOURCE)
