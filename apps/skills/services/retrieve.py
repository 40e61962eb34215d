"""Act-time retrieval: the top-k skills for a task, ranked by relevance with a bounded adjustment
for their outcomes; each served is recorded as a use (the read path updates no skill row)."""

import json
from dataclasses import dataclass

from django.db.models import FloatField, Min, Subquery, Value
from django.db.models.functions import Coalesce
from pgvector.django import CosineDistance

from apps.core.errors import InvalidInput
from apps.search.engine import rrf_scores, search_source
from apps.search.engine.ranking import query_vector
from apps.skills.effectiveness import Adjustment, ranking_adjustments
from apps.skills.models import ExperienceType, Skill, SkillUse, SkillVersion, SkillWithheld
from apps.skills.search import PROCEDURAL
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader
from apps.tenancy.services import end_user_get_or_create

# Relevance picks the candidates; effectiveness reorders them: twice k, so an adjustment can lift a
# skill a few places but never bring in one the task is not about.
CANDIDATE_FACTOR = 2
MIN_CANDIDATES = 10
# The candidates ranked by the requests they were learned from, fused with the search's own ranking
# (whose keyword and semantic rankings weigh 3 and 1): as strong as the keyword ranking.
TAUGHT_FOR_WEIGHT = 3.0


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


def _taught_for(*, task: str, skills: list[Skill]) -> dict:
    """{skill id: its share of the fused relevance} by how close `task` is to the requests the skill was
    learned from (the workflow lessons of its lineage, every teacher's): a generic skill one request
    resembles does not outrank the one taught for such requests. Used to order, never served: one
    user's words stay theirs."""
    if len(skills) < 2:
        return {}
    closest = (
        SkillVersion.experiences.through.objects.filter(
            skillversion__skill__in=[skill.pk for skill in skills],
            skillexperience__experience_type=ExperienceType.WORTH_LEARNING,
            skillexperience__embedding__isnull=False,
        )
        .values("skillversion__skill_id")
        .annotate(distance=Min(CosineDistance("skillexperience__embedding", json.loads(query_vector(task).literal))))
        .order_by("distance")
    )
    ranking = [row["skillversion__skill_id"] for row in closest]
    return {pk: score * TAUGHT_FOR_WEIGHT for pk, (_, score) in rrf_scores([ranking], key=lambda pk: pk).items()}


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
    taught_for = _taught_for(task=task, skills=[skill for skill, _ in hits])
    return sorted(
        (
            Retrieved(skill=skill, relevance=score + taught_for.get(skill.pk, 0.0), adjustment=adjustments[skill.pk])
            for skill, score in hits
        ),
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
    if end_user is not None:
        withheld = _withheld_first(reader=client.reader, task=task, ranked=ranked, end_user=end_user)
        if withheld is not None:
            SkillWithheld.objects.bulk_create(
                [
                    SkillWithheld(
                        organization_id=withheld.organization_id,
                        scope=withheld.scope,
                        skill=withheld,
                        end_user=end_user,
                    )
                ],
                ignore_conflicts=True,
            )
    return ranked


def _withheld_first(*, reader: Reader, task: str, ranked: list[Retrieved], end_user) -> Skill | None:
    """The active skill not shared with `end_user` whose text is closer to the task than that of the skill
    they were served first (or any, when none was): it would have answered them (queued for review)."""
    vector = json.loads(query_vector(task).literal)
    candidates = (
        reader.rows(Skill)
        .filter(status=Skill.Status.ACTIVE, shared=False, end_user__isnull=True, embedding__isnull=False)
        .exclude(supporters__contains=[end_user.pk])
        .annotate(distance=CosineDistance("embedding", vector))
    )
    if ranked:  # closer than the skill served first, in the same statement (a cosine distance is at most 2)
        served = Skill.objects.filter(pk=ranked[0].skill.pk).annotate(distance=CosineDistance("embedding", vector))
        candidates = candidates.filter(
            distance__lt=Coalesce(Subquery(served.values("distance")[:1]), Value(3.0), output_field=FloatField())
        )
    return candidates.only("pk", "organization_id", "scope").order_by("distance").first()
