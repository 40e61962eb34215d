"""Whether a skill works: its uses joined to the outcomes of the task sessions they served, the
success rate with a Wilson interval, the lift against the scope's other task sessions with a
Newcombe interval, and the bounded ranking adjustment retrieval applies.

A use counts towards an outcome once its session is sealed with `success` or `failure`; each
session counts once per skill (or version), however often it retrieved it. The comparison group is
the sealed task sessions of the same scopes with a known outcome that did not retrieve the skill.
"""

import math
from dataclasses import asdict, dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import connection

from apps.skills.models import Skill, SkillFeedback

# The interval's confidence (two-sided 95%: z = 1.96).
Z = 1.959964
# Review's boundary (Evidence.harmful), chosen with bench/skill_effect.py.
REVIEW_Z = 2.05
REVIEW_HORIZON = 50
RANKING_CACHE_SECONDS = 30
# A shrunk lift of this size moves a skill's ranking score most of the way to its bound (tanh).
LIFT_SCALE = 0.25

# A use's session: same organisation, end user, scope and id, sealed as a task session.
_SESSION_JOIN = """
    JOIN conversations_session s ON s.organization_id = u.organization_id AND s.end_user_id = u.end_user_id
     AND s.scope = u.session_scope AND s.session_id = u.session_id
     AND s.status = 'sealed' AND s.session_tag = 'task' AND s.outcome IN ('success', 'failure')
"""


def wilson_interval(successes: int, trials: int, z: float = Z) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None without trials)."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def review_z(sessions: int) -> float:
    """The width of the interval review decides on, after `sessions` sessions (see Evidence.harmful)."""
    return REVIEW_Z * math.sqrt(max(REVIEW_HORIZON / sessions, 1.0))


def newcombe_interval(s1: int, n1: int, s2: int, n2: int, z: float = Z) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval (his method 10) of p1 - p2 from two Wilson intervals."""
    first, second = wilson_interval(s1, n1, z), wilson_interval(s2, n2, z)
    if first is None or second is None:
        return None
    p1, p2 = s1 / n1, s2 / n2
    (l1, u1), (l2, u2) = first, second
    difference = p1 - p2
    lower = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, lower), min(1.0, upper)


@dataclass
class Evidence:
    """What is known of one skill (or one version of it)."""

    uses: int = 0
    applied: int = 0
    sessions: int = 0
    successes: int = 0
    failures: int = 0
    baseline_sessions: int = 0
    baseline_successes: int = 0

    @property
    def rate(self) -> float | None:
        return self.successes / self.sessions if self.sessions else None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_successes / self.baseline_sessions if self.baseline_sessions else None

    @property
    def lift(self) -> float | None:
        if self.rate is None or self.baseline_rate is None:
            return None
        return self.rate - self.baseline_rate

    def lift_interval(self) -> tuple[float, float] | None:
        return newcombe_interval(self.successes, self.sessions, self.baseline_successes, self.baseline_sessions)

    def harmful(self) -> bool:
        """The lift's review interval lies below zero, over at least SKILL_REVIEW_MIN_SESSIONS sessions.

        Review looks again after every sealed session, and each look at a 95% interval would add its
        own chance of sending a neutral skill to review. The review interval is wider while the
        evidence is young (an O'Brien-Fleming-shaped boundary, REVIEW_Z · sqrt(REVIEW_HORIZON / n)
        until n reaches REVIEW_HORIZON sessions, REVIEW_Z after), which keeps the share of neutral
        skills sent by REVIEW_HORIZON sessions near 5% (bench/skill_effect.py measures it)."""
        if self.sessions < settings.SKILL_REVIEW_MIN_SESSIONS:
            return False
        z = review_z(self.sessions)
        interval = newcombe_interval(self.successes, self.sessions, self.baseline_successes, self.baseline_sessions, z)
        return interval is not None and interval[1] < 0

    def as_dict(self) -> dict:
        rate_interval, lift_interval = wilson_interval(self.successes, self.sessions), self.lift_interval()
        return {
            **asdict(self),
            "success_rate": _rounded(self.rate),
            "success_rate_interval": _rounded_pair(rate_interval),
            "baseline_rate": _rounded(self.baseline_rate),
            "lift": _rounded(self.lift),
            "lift_interval": _rounded_pair(lift_interval),
        }

    def summary(self) -> str:
        """The figures in a sentence, for a review note."""
        interval = self.lift_interval()
        z = review_z(self.sessions)
        review = newcombe_interval(self.successes, self.sessions, self.baseline_successes, self.baseline_sessions, z)
        return (
            f"{self.successes} of {self.sessions} task sessions that retrieved it succeeded ({self.rate:.0%}), "
            f"against {self.baseline_successes} of {self.baseline_sessions} ({self.baseline_rate:.0%}) of the "
            f"scope's sessions that did not: lift {self.lift:+.2f}, 95% interval [{interval[0]:+.2f}, {interval[1]:+.2f}]; "
            f"review interval (z = {z:.2f}) [{review[0]:+.2f}, {review[1]:+.2f}]."
        )


def _rounded(value):
    return None if value is None else round(value, 4)


def _rounded_pair(pair):
    return None if pair is None else [round(pair[0], 4), round(pair[1], 4)]


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _use_counts(skill_id) -> dict:
    """{version or None (all): [uses, applied, sessions, successes, failures]} of one skill."""
    counts = {}
    rows = _fetch(
        f"""
        SELECT u.version, count(*), count(u.applied_at),
               count(DISTINCT s.id), count(DISTINCT s.id) FILTER (WHERE s.outcome = 'success'),
               count(DISTINCT s.id) FILTER (WHERE s.outcome = 'failure'), GROUPING(u.version)
        FROM skills_skilluse u LEFT {_SESSION_JOIN.strip()}
        WHERE u.skill_id = %s GROUP BY ROLLUP (u.version)
        """,
        [skill_id],
    )
    for version, uses, applied, sessions, successes, failures, total in rows:
        counts[None if total else version] = [uses, applied, sessions, successes, failures]
    return counts


def _baseline(skill: Skill) -> tuple[int, int]:
    """(sessions, successes) of the scope's sealed task sessions with an outcome that did not use the
    skill: the scopes are those its uses' sessions live in (the skill's own when it has none)."""
    ((sessions, successes),) = _fetch(
        """
        SELECT count(*), count(*) FILTER (WHERE s.outcome = 'success') FROM conversations_session s
        WHERE s.organization_id = %s AND s.session_tag = 'task' AND s.status = 'sealed'
          AND s.outcome IN ('success', 'failure')
          AND s.scope = ANY(ARRAY(SELECT DISTINCT session_scope FROM skills_skilluse
                                  WHERE skill_id = %s AND session_scope <> '') || ARRAY[%s::varchar])
          AND NOT EXISTS (SELECT 1 FROM skills_skilluse u WHERE u.skill_id = %s
                          AND u.organization_id = s.organization_id AND u.end_user_id = s.end_user_id
                          AND u.session_scope = s.scope AND u.session_id = s.session_id)
        """,
        [skill.organization_id, skill.pk, skill.scope, skill.pk],
    )
    return sessions, successes


def skill_evidence(skill: Skill) -> tuple[Evidence, dict[int, Evidence]]:
    """The skill's evidence overall and per version (versions that were retrieved)."""
    baseline_sessions, baseline_successes = _baseline(skill)
    evidence = {}
    for version, (uses, applied, sessions, successes, failures) in _use_counts(skill.pk).items():
        evidence[version] = Evidence(
            uses=uses,
            applied=applied,
            sessions=sessions,
            successes=successes,
            failures=failures,
            baseline_sessions=baseline_sessions,
            baseline_successes=baseline_successes,
        )
    overall = evidence.pop(None, None) or Evidence(
        baseline_sessions=baseline_sessions, baseline_successes=baseline_successes
    )
    return overall, dict(sorted(evidence.items(), reverse=True))


def feedback_counts(skill: Skill) -> dict:
    counts = dict.fromkeys(SkillFeedback.Verdict.values, 0)
    for verdict, count in _fetch(
        "SELECT verdict, count(*) FROM skills_skillfeedback WHERE skill_id = %s GROUP BY verdict", [skill.pk]
    ):
        counts[verdict] = count
    return counts


def skill_effectiveness(skill: Skill) -> dict:
    """The `effectiveness` object of a skill's API detail."""
    overall, versions = skill_evidence(skill)
    return {
        **overall.as_dict(),
        "feedback": feedback_counts(skill),
        "versions": [{"version": version, **evidence.as_dict()} for version, evidence in versions.items()],
    }


# Ranking ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Adjustment:
    factor: float
    reason: str


def _scope_rates(organization_id, scopes: list[str]) -> dict[str, tuple[int, int]]:
    """{scope: (sessions, successes)} of sealed task sessions with an outcome."""
    rows = _fetch(
        """
        SELECT scope, count(*), count(*) FILTER (WHERE outcome = 'success') FROM conversations_session
        WHERE organization_id = %s AND scope = ANY(%s) AND session_tag = 'task' AND status = 'sealed'
          AND outcome IN ('success', 'failure') GROUP BY scope
        """,
        [organization_id, scopes],
    )
    return {scope: (sessions, successes) for scope, sessions, successes in rows}


def _skill_outcomes(skill_ids: list) -> dict:
    """{skill id: (sessions, successes)} over every version."""
    rows = _fetch(
        f"""
        SELECT u.skill_id, count(DISTINCT s.id), count(DISTINCT s.id) FILTER (WHERE s.outcome = 'success')
        FROM skills_skilluse u {_SESSION_JOIN} WHERE u.skill_id = ANY(%s::uuid[]) GROUP BY u.skill_id
        """,
        [[str(skill_id) for skill_id in skill_ids]],
    )
    return {skill_id: (sessions, successes) for skill_id, sessions, successes in rows}


def _cached_many(prefix: str, keys: list, compute) -> dict:
    """{key: value} read from the cache, the missing ones computed in one call and kept briefly:
    evidence moves with sealed sessions, not with every retrieval."""
    cache_keys = {f"effectiveness:{prefix}:{key}": key for key in keys}
    found = {cache_keys[cache_key]: value for cache_key, value in cache.get_many(list(cache_keys)).items()}
    missing = [key for key in keys if key not in found]
    if missing:
        computed = compute(missing)
        fresh = {key: computed.get(key) for key in missing}
        cache.set_many({f"effectiveness:{prefix}:{key}": value for key, value in fresh.items()}, RANKING_CACHE_SECONDS)
        found.update(fresh)
    return found


def effectiveness_factor(
    *, successes: int, sessions: int, scope_rate: float, weight: float, prior: float
) -> tuple[float, float]:
    """(the ranking factor, the shrunk success rate): the rate shrunk towards the scope's by a prior
    worth `prior` sessions, its difference from the scope's through tanh, within 1 ± weight; 1 while
    the Wilson interval of the skill's own rate still holds the scope's rate."""
    shrunk = (successes + prior * scope_rate) / (sessions + prior)
    low, high = wilson_interval(successes, sessions) or (0.0, 1.0)
    if low <= scope_rate <= high:
        # Relevance scores of neighbouring ranks differ by a few per cent (rank fusion), so even a small
        # factor reorders them: outcomes move a skill only once they tell it apart from its scope.
        return 1.0, shrunk
    return 1 + weight * math.tanh((shrunk - scope_rate) / LIFT_SCALE), shrunk


def ranking_adjustments(skills: list[Skill]) -> dict:
    """{skill id: Adjustment}: a factor within 1 ± SKILL_EFFECTIVENESS_WEIGHT on the relevance score.

    The skill's success rate is shrunk towards its scope's rate by a prior worth
    SKILL_EFFECTIVENESS_PRIOR_SESSIONS sessions, so a new skill starts at factor 1 and a handful of
    outcomes moves it little; the factor is 1 + weight · tanh(shrunk lift / LIFT_SCALE). A skill whose
    success rate's Wilson interval still holds the scope's rate keeps factor 1: relevance comes first.
    """
    weight = settings.SKILL_EFFECTIVENESS_WEIGHT
    if not skills:
        return {}
    if weight == 0:
        return {skill.pk: Adjustment(1.0, "effectiveness ranking is off") for skill in skills}
    organization_id = skills[0].organization_id
    scopes = sorted({skill.scope for skill in skills})
    rates = _cached_many(f"scope:{organization_id}", scopes, lambda missing: _scope_rates(organization_id, missing))
    outcomes = _cached_many("skill", [skill.pk for skill in skills], _skill_outcomes)
    prior = settings.SKILL_EFFECTIVENESS_PRIOR_SESSIONS
    adjustments = {}
    for skill in skills:
        scope_sessions, scope_successes = rates.get(skill.scope) or (0, 0)
        sessions, successes = outcomes.get(skill.pk) or (0, 0)
        if not sessions or not scope_sessions:
            adjustments[skill.pk] = Adjustment(1.0, "no task outcomes yet")
            continue
        centre = scope_successes / scope_sessions
        factor, shrunk = effectiveness_factor(
            successes=successes, sessions=sessions, scope_rate=centre, weight=weight, prior=prior
        )
        if factor == 1.0:
            low, high = wilson_interval(successes, sessions)
            adjustments[skill.pk] = Adjustment(
                1.0,
                f"{successes} of {sessions} sessions succeeded ({successes / sessions:.0%}); not yet told apart "
                f"from the scope's {centre:.0%} (95% interval {low:.0%}-{high:.0%})",
            )
            continue
        adjustments[skill.pk] = Adjustment(
            round(factor, 4),
            f"{successes} of {sessions} sessions succeeded ({successes / sessions:.0%}) against the scope's "
            f"{centre:.0%}; shrunk estimate {shrunk:.0%} (prior of {prior} sessions)",
        )
    return adjustments


def failure_notes(skills: list[Skill]) -> dict:
    """{skill id: a sentence on the failures of the sessions that retrieved it}, for the skills with
    failures: what evolution reads as `worth_avoiding` context when it edits them."""
    if not skills:
        return {}
    outcomes = _skill_outcomes([skill.pk for skill in skills])
    rates = _scope_rates(skills[0].organization_id, sorted({skill.scope for skill in skills}))
    notes = {}
    for skill in skills:
        sessions, successes = outcomes.get(skill.pk) or (0, 0)
        if sessions == successes:
            continue
        scope_sessions, scope_successes = rates.get(skill.scope) or (0, 0)
        notes[skill.pk] = (
            f"{sessions - successes} of {sessions} task sessions that retrieved it failed"
            + (
                f" (the scope's sessions succeed {scope_successes / scope_sessions:.0%} of the time)"
                if scope_sessions
                else ""
            )
            + ("; it waits for a person's review" if skill.status == Skill.Status.PENDING_REVIEW else "")
        )
    return notes


# The admin -----------------------------------------------------------------------------------------

# Per skill, over the distinct sessions that retrieved it: for a sortable changelist column.
SESSIONS_SQL = f"""(SELECT count(DISTINCT s.id) FROM skills_skilluse u {_SESSION_JOIN}
    WHERE u.skill_id = skills_skill.id)"""
SUCCESS_RATE_SQL = f"""(SELECT count(DISTINCT s.id) FILTER (WHERE s.outcome = 'success')::float
    / nullif(count(DISTINCT s.id), 0) FROM skills_skilluse u {_SESSION_JOIN} WHERE u.skill_id = skills_skill.id)"""


def outcomes_over_time(skill: Skill, *, weeks: int = 12) -> list[tuple]:
    """[(week start, successes, failures)] of the sessions that retrieved the skill, by the week they
    were sealed, the last `weeks` weeks that had any."""
    rows = _fetch(
        f"""
        SELECT date_trunc('week', s.sealed_at) AS week, count(DISTINCT s.id) FILTER (WHERE s.outcome = 'success'),
               count(DISTINCT s.id) FILTER (WHERE s.outcome = 'failure')
        FROM skills_skilluse u {_SESSION_JOIN} WHERE u.skill_id = %s
        GROUP BY week ORDER BY week DESC LIMIT %s
        """,
        [skill.pk, weeks],
    )
    return list(reversed(rows))
