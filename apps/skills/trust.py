"""Trust between the end users of a scope: what one user teaches is served to others only once enough
users taught it or a person approved it (docs/concepts.md), as one Q the selectors and search share."""

from django.conf import settings
from django.db.models import Q, Subquery

from apps.tenancy.models import EndUser


def shared_q() -> Q:
    return Q(shared=True, end_user__isnull=True)


def visible_q(end_user_id) -> Q:
    """`end_user_id`: an EndUser id, an expression giving one, or None (no user named)."""
    if end_user_id is None:
        return shared_q()
    return shared_q() | Q(end_user_id=end_user_id) | Q(supporters__contains=[end_user_id])


def served_q(*, organization_id, user_id: str | None) -> Q:
    """The end user is looked up inside the query: one statement, and an unknown user is served the shared skills."""
    if user_id is None:
        return shared_q()
    return visible_q(
        Subquery(EndUser.objects.filter(organization_id=organization_id, user_id=user_id).order_by().values("pk"))
    )


def teachers(experiences) -> frozenset:
    return frozenset(experience.end_user_id for experience in experiences)


def corroborated(users) -> bool:
    return len(set(users)) >= settings.SKILL_SHARE_MIN_USERS


def may_reach(*, experiences, audience_ids: frozenset | None) -> bool:
    """`audience_ids` None: everyone. Each user it reaches taught it, enough did, or a person approved."""
    taught_by = teachers(experiences)
    if corroborated(taught_by) or any(experience.approved_by for experience in experiences):
        return True
    return audience_ids is not None and audience_ids <= taught_by
