"""Reads of skills and experiences, always within the caller's organisation and read scopes."""

from django.contrib.postgres.search import SearchQuery
from django.db.models import Count, IntegerField, Max, OuterRef, Prefetch, Q, Subquery
from django.db.models.functions import Coalesce

from apps.conversations.selectors import cites_turns_being_deleted, session_list, sessions_being_deleted
from apps.skills.models import Skill, SkillExperience, SkillUse, SkillVersion
from apps.skills.trust import served_q
from apps.tenancy.readers import Reader


def skill_served(reader: Reader, user_id: str | None = None) -> Q:
    """The search visibility of `procedural`: served to `user_id` (None: the shared ones)."""
    return reader.condition() & served_q(organization_id=reader.organization_id, user_id=user_id)


def experience_visible(reader: Reader, user_id: str | None = None) -> Q:
    """The search visibility of `experience` (ignoring `user_id`): none of or citing a session being deleted."""
    organization_id = reader.organization_id
    return (
        reader.condition()
        & ~Q(session__in=sessions_being_deleted(organization_id=organization_id))
        & ~cites_turns_being_deleted(organization_id=organization_id)
    )


def with_retrievals(queryset):
    """Counted from the skill's uses: retrieval updates no skill row."""
    uses = SkillUse.objects.filter(skill=OuterRef("pk")).order_by().values("skill")
    return queryset.annotate(
        retrieval_count=Coalesce(Subquery(uses.annotate(n=Count("*")).values("n"), output_field=IntegerField()), 0),
        last_retrieved_at=Subquery(uses.annotate(last=Max("created_at")).values("last")),
    )


def skill_list(*, reader: Reader, filters: dict | None = None):
    """Archived skills only when asked for by status; with a user_id, only those that user is served."""
    filters = filters or {}
    queryset = with_retrievals(reader.rows(Skill).select_related("end_user").defer("embedding", "search_vector"))
    if filters.get("status"):
        queryset = queryset.filter(status=filters["status"])
    else:
        queryset = queryset.exclude(status=Skill.Status.ARCHIVED)
    for name in ("entry_type", "scope"):
        if filters.get(name):
            queryset = queryset.filter(**{name: filters[name]})
    if filters.get("user_id"):
        queryset = queryset.filter(skill_served(reader, filters["user_id"]))
    if filters.get("q"):
        query = SearchQuery(filters["q"], config="english", search_type="websearch")
        queryset = queryset.filter(Q(search_vector=query) | Q(name__icontains=filters["q"]))
    return queryset.order_by("-retrieval_count", "name", "id")


def skill_detail_queryset(*, reader: Reader):
    """skill_list without its default filters, with the version history prefetched."""
    versions = Prefetch(
        "versions",
        queryset=SkillVersion.objects.order_by("-version").prefetch_related(
            Prefetch("experiences", queryset=SkillExperience.objects.only("id"))
        ),
    )
    return with_retrievals(
        reader.rows(Skill).select_related("end_user").defer("embedding", "search_vector").prefetch_related(versions)
    )


def skill_writable_queryset(*, reader: Reader):
    return reader.rows(Skill).defer("embedding", "search_vector")


def experience_list(*, reader: Reader, filters: dict | None = None):
    filters = filters or {}
    queryset = (
        reader.objects(SkillExperience)
        .filter(experience_visible(reader))
        .select_related("end_user", "session")
        .defer("embedding", "search_vector")
    )
    for name in ("status", "experience_type", "scope"):
        if filters.get(name):
            queryset = queryset.filter(**{name: filters[name]})
    if filters.get("user_id"):
        queryset = queryset.filter(end_user__user_id=filters["user_id"])
    if filters.get("session_id"):
        queryset = queryset.filter(session__session_id=filters["session_id"])
    if filters.get("q"):
        query = SearchQuery(filters["q"], config="english", search_type="websearch")
        queryset = queryset.filter(search_vector=query)
    return queryset.order_by("-created_at", "id")


def feedback_session(*, reader: Reader, skill: Skill, user_id: str, session_id: str, write_scope: str | None = None):
    """Preferring the skill's scope, then `write_scope`; None when there is none or it is ambiguous."""
    sessions = list(
        session_list(reader=reader).filter(end_user__user_id=user_id, session_id=session_id).select_related("end_user")
    )
    by_scope = {session.scope: session for session in sessions}
    return by_scope.get(skill.scope) or by_scope.get(write_scope) or (sessions[0] if len(sessions) == 1 else None)


def session_distilled_into(session) -> str:
    """Registered with apps.conversations' learned-from checks ("" if not learned from)."""
    if SkillExperience.objects.filter(session_id=session.pk).exists():
        return "skill experiences were distilled from it"
    return ""


def skills_of_end_user(*, end_user):
    """The skills a person supports, owns or taught (an experience of theirs in a version's lineage)."""
    taught = SkillVersion.objects.filter(experiences__end_user=end_user).values("skill_id")
    return Skill.objects.filter(organization_id=end_user.organization_id).filter(
        Q(supporters__contains=[end_user.pk]) | Q(end_user=end_user) | Q(pk__in=taught)
    )
