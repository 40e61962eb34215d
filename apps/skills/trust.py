"""Trust between the end users of a scope: what one user's task sessions teach is served to other
users only once at least SKILL_SHARE_MIN_USERS distinct users taught it, or a person approved it.

The visibility rule is written here once, as SQL for the search engine (skills/retrieve and
memory/search) and as a Q for the ORM selectors; the corroboration rule evolution applies to each
change sits beside it. docs/concepts.md ("Trust between end users") states the semantics.
"""

from django.conf import settings
from django.db.models import Q

# A skill every user of its scope is served: shared, and no single user's own.
SHARED_SQL = "(t.shared AND t.end_user_id IS NULL)"
# A skill the caller's end user (`e`, a tenancy_enduser row) is served besides the shared ones:
# their own, or one they taught.
TAUGHT_SQL = "(e.id = t.end_user_id OR e.id = ANY(t.supporters))"


def shared_q() -> Q:
    return Q(shared=True, end_user__isnull=True)


def visible_q(end_user_id) -> Q:
    """The skills an end user (an EndUser id; None: no user named) is served."""
    if end_user_id is None:
        return shared_q()
    return shared_q() | Q(end_user_id=end_user_id) | Q(supporters__contains=[end_user_id])


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
