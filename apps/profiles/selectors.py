"""Reads of compiled memory, always within the caller's organisation and read scopes."""

from django.db.models import Prefetch, Q

from apps.conversations.models import Session
from apps.profiles.models import Edge, Entity, Mention, Profile, ProfileRevision
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader


def profile_visible(reader: Reader, user_id: str | None = None) -> Q:
    """The search visibility of pages (`user_id` is not part of it). A page quoting a session being deleted is read
    until the purge clears it: following every page's sources is too costly for every search."""
    return reader.condition()


def profile_list(*, reader: Reader, filters: dict):
    queryset = (
        reader.objects(Profile)
        .filter(profile_visible(reader))
        .select_related("end_user")
        .defer("embedding", "search_vector")
    )
    if filters.get("user_id"):
        queryset = queryset.filter(end_user__user_id=filters["user_id"])
    queryset = queryset.filter(status=filters.get("status") or Profile.Status.ACTIVE)
    queryset = queryset.filter(kind=filters.get("kind") or Profile.Kind.PERSON)
    return queryset.order_by("name", "id")


def profile_detail_queryset(*, reader: Reader):
    """Any status: an archived page is still readable by id, with its history."""
    return (
        Profile.objects.filter(profile_visible(reader))
        .select_related("end_user")
        .defer("embedding", "search_vector")
        .prefetch_related("sources", Prefetch("revisions", queryset=ProfileRevision.objects.order_by("-number")))
    )


def entity_list(*, reader: Reader, filters: dict | None = None):
    """One user's entities, most mentioned first, each with its edges in both directions."""
    edges = Edge.objects.select_related("source", "target").order_by("-weight", "id")
    filters = filters or {}
    queryset = (
        reader.rows(Entity)
        .select_related("end_user")
        .prefetch_related(Prefetch("edges_out", queryset=edges), Prefetch("edges_in", queryset=edges))
    )
    lookups = {"user_id": "end_user__user_id", "kind": "kind"}
    queryset = queryset.filter(**{lookup: filters[name] for name, lookup in lookups.items() if filters.get(name)})
    return queryset.order_by("-mention_count", "name", "id")


def write_scope_users(*, client):
    """Users with a session in the client's write scope: those whose topics it may compile."""
    sessions = Session.objects.filter(organization=client.organization, scope=client.write_scope)
    return EndUser.objects.filter(organization=client.organization, pk__in=sessions.values("end_user_id"))


def session_projected_into(session) -> str:
    """A learned-from check of apps.conversations: why the session counts as learned from ("" if not)."""
    return "entities were projected from it" if Mention.objects.filter(session_id=session.pk).exists() else ""
