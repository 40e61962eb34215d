"""The profile and entity endpoints' operations (REST: apps.profiles.views)."""

from apps.core.operations import Page, check_ids, get_or_404, operation, paginate, validated
from apps.core.pagination import DEFAULT_LIMIT
from apps.profiles.selectors import entity_list, profile_detail_queryset, profile_list
from apps.profiles.serializers import (
    EntityListFilterSerializer,
    EntityOutputSerializer,
    ProfileDetailOutputSerializer,
    ProfileListFilterSerializer,
    ProfileOutputSerializer,
)


@operation()
def list_profiles(*, client, query) -> Page:
    """List compiled person profiles in the caller's read scopes."""
    filters = validated(ProfileListFilterSerializer, query)
    profiles = profile_list(reader=client.reader, filters=filters)
    return paginate(profiles, filters=filters, serializer_class=ProfileOutputSerializer, default_limit=DEFAULT_LIMIT)


@operation()
def get_profile(*, client, profile_id: str) -> dict:
    """Read a profile with its revisions and the sources each cites."""
    check_ids(profile_id=profile_id)
    return ProfileDetailOutputSerializer(get_or_404(profile_detail_queryset(reader=client.reader), pk=profile_id)).data


@operation()
def list_entities(*, client, query) -> Page:
    """List one user's entities and their co-occurrence edges."""
    filters = validated(EntityListFilterSerializer, query)
    entities = entity_list(reader=client.reader, filters=filters)
    return paginate(entities, filters=filters, serializer_class=EntityOutputSerializer, default_limit=DEFAULT_LIMIT)
