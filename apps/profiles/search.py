"""Compiled pages as search memory types: `profile` (a person's) and `topic`, two kinds of one table,
each with its own cap in a mixed search."""

from django.conf import settings
from django.db.models import Q

from apps.profiles.models import Profile
from apps.profiles.selectors import profile_visible
from apps.profiles.serializers import ProfileOutputSerializer
from apps.search.registry import SearchSource, register_source

# `sources`: what the page quotes, so a caller can cite the turns and memories behind a hit.
PAGE_FIELDS = tuple("name markdown revision entity_id sources user_id scope compiled_at created_at updated_at".split())


def _page_source(memory_type: str, kind: Profile.Kind, mixed_cap) -> SearchSource:
    return SearchSource(
        memory_type=memory_type,
        model=Profile,
        output=ProfileOutputSerializer,
        item_fields=PAGE_FIELDS,
        visible=profile_visible,
        text=lambda page: page.markdown,
        served=Q(status=Profile.Status.ACTIVE, kind=kind),
        default_method="hybrid",
        time_column="compiled_at",
        user_column="end_user_id",
        fuzzy_fields=("name", "markdown"),
        select_related=("end_user",),
        embedding_text=Profile.embedding_text,
        mixed_cap=mixed_cap,
        rows=(("kind", kind.value),),
    )


def register_sources() -> None:
    register_source(_page_source("profile", Profile.Kind.PERSON, lambda: settings.SEARCH_PROFILE_HITS))
    register_source(_page_source("topic", Profile.Kind.TOPIC, lambda: settings.SEARCH_TOPIC_HITS))
