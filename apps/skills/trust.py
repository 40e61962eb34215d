"""Trust between the end users of a scope: what one user's task sessions teach is served to other
users only once at least SKILL_SHARE_MIN_USERS distinct users taught it, or a person approved it.

The visibility rule is written here once, as a Q that the ORM selectors filter by and the search
engine compiles into its SQL (skills/retrieve and memory/search); the corroboration rule evolution
applies to each change sits beside it. docs/concepts.md ("Trust between end users") states the semantics.
"""

from django.conf import settings
from django.db.models import Q, Subquery

from apps.tenancy.models import EndUser


def shared_q() -> Q:
    """A skill every user of its scope is served: shared, and no single user's own."""
    return Q(shared=True, end_user__isnull=True)


def visible_q(end_user_id) -> Q:
    """The skills an end user (an EndUser id, or an expression giving one; None: no user named) is
    served: the shared ones, their own and those they taught."""
    if end_user_id is None:
        return shared_q()
    return shared_q() | Q(end_user_id=end_user_id) | Q(supporters__contains=[end_user_id])


def served_q(*, organization_id, user_id: str | None) -> Q:
    """visible_q for the caller's `user_id` (None: no user named), the end user looked up inside the
    query (one statement, whether or not the user exists: an unknown one is served the shared skills)."""
    if user_id is None:
        return shared_q()
    return visible_q(
        Subquery(EndUser.objects.filter(organization_id=organization_id, user_id=user_id).order_by().values("pk"))
    )


def teachers(experiences) -> frozenset:
    """The distinct end users whose sessions taught these experiences."""
    return frozenset(experience.end_user_id for experience in experiences)


def corroborated(users) -> bool:
    return len(set(users)) >= settings.SKILL_SHARE_MIN_USERS


def may_reach(*, experiences, audience_ids: frozenset | None) -> bool:
    """Whether a change taught by `experiences` may be served to `audience_ids` (None: everyone):
    each user it reaches taught it, or enough users did, or a person approved one of its lessons."""
    taught_by = teachers(experiences)
    if corroborated(taught_by) or any(experience.approved_by for experience in experiences):
        return True
    return audience_ids is not None and audience_ids <= taught_by
