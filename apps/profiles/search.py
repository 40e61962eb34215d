"""Compiled pages as memory types of the one search engine: a person's page (`profile`) and a
topic's page (`topic`), two kinds of one table, each with its own cap in a mixed search."""

from django.conf import settings

from apps.profiles.models import Profile
from apps.profiles.serializers import ProfileOutputSerializer
from apps.search.registry import SearchSource, register_source

# `sources`: what the page quotes, so a caller can cite the turns and memories behind a hit.
PAGE_FIELDS = (
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
)

PROFILE_SOURCE = SearchSource(
    memory_type="profile",
    model=Profile,
    output=ProfileOutputSerializer,
    item_fields=PAGE_FIELDS,
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
    output=ProfileOutputSerializer,
    item_fields=PAGE_FIELDS,
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
