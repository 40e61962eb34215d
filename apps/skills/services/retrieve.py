"""Act-time retrieval: the top-k skills for a task, ranked by relevance with a bounded adjustment
for their outcomes; each served is recorded as a use (the read path updates no skill row)."""

from dataclasses import dataclass

from apps.core.errors import InvalidInput
from apps.search.engine import search_source
from apps.skills.effectiveness import Adjustment, ranking_adjustments
from apps.skills.models import Skill, SkillUse
from apps.skills.search import PROCEDURAL
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader
from apps.tenancy.services import end_user_get_or_create

# Relevance picks the candidates; effectiveness reorders them: twice k, so an adjustment can lift a
# skill a few places but never bring in one the task is not about.
CANDIDATE_FACTOR = 2
MIN_CANDIDATES = 10


@dataclass
class Retrieved:
    skill: Skill
    relevance: float
    adjustment: Adjustment

    @property
    def score(self) -> float:
        return self.relevance * self.adjustment.factor


def _end_user(*, client, user_id: str | None, session_id: str | None):
    if session_id is None:
        if user_id is None:
            return None
        return EndUser.objects.filter(organization_id=client.organization_id, user_id=user_id).first()
    if user_id is None:
        raise InvalidInput({"user_id": ["A session belongs to a user: send user_id with session_id."]})
    if client.write_scope is None:
        raise InvalidInput({"session_id": ["A read-only client has no sessions; leave session_id out."]})
    return end_user_get_or_create(organization=client.organization, user_id=user_id)


def skills_rank(*, reader: Reader, task: str, k: int, user_id: str | None = None) -> list[Retrieved]:
    """The best k by hybrid relevance times the effectiveness factor; without a user_id, shared skills only."""
    hits = search_source(
        PROCEDURAL,
        reader=reader,
        query=task,
        method="hybrid",
        limit=max(CANDIDATE_FACTOR * k, MIN_CANDIDATES),
        filters={"user_id": user_id} if user_id else {},
    )
    adjustments = ranking_adjustments([skill for skill, _ in hits])
    return sorted(
        (Retrieved(skill=skill, relevance=score, adjustment=adjustments[skill.pk]) for skill, score in hits),
        key=lambda retrieved: -retrieved.score,
    )[:k]


def skills_retrieve(
    *, client, task: str, k: int, user_id: str | None = None, session_id: str | None = None
) -> list[Retrieved]:
    """skills_rank, each skill returned recorded as a SkillUse of the named session, if any."""
    end_user = _end_user(client=client, user_id=user_id, session_id=session_id)
    ranked = skills_rank(reader=client.reader, task=task, k=k, user_id=user_id)
    SkillUse.objects.bulk_create(
        SkillUse(
            organization_id=retrieved.skill.organization_id,
            scope=retrieved.skill.scope,
            skill=retrieved.skill,
            version=retrieved.skill.version,
            rank=rank,
            score=retrieved.score,
            client=client,
            end_user=end_user,
            session_scope=client.write_scope if session_id else "",
            session_id=session_id or "",
        )
        for rank, retrieved in enumerate(ranked, start=1)
    )
    return ranked
