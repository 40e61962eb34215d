"""Whether a skill works: the outcomes of the task sessions its counted uses served, one voice per end
user (docs/decisions.md), with Wilson and Newcombe intervals, review's evidence and the ranking factor."""

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Max

from apps.conversations.models import Session, SessionTag
from apps.skills.models import Skill, SkillFeedback, SkillUse, SkillVersion

Z = 1.959964  # two-sided 95%
# Review's boundary (Evidence.harmful), chosen with bench/skills/effect.py.
REVIEW_Z = 2.05
REVIEW_HORIZON = 50
RANKING_CACHE_SECONDS = 30
# A shrunk lift of this size moves a skill's ranking score most of the way to its bound (tanh).
LIFT_SCALE = 0.25

_SESSIONS = Session._meta.db_table
_USES = SkillUse._meta.db_table
_FEEDBACK = SkillFeedback._meta.db_table
_SKILLS = Skill._meta.db_table


def _session_column(field: str) -> str:
    """A column of the conversations app's sessions (alias s), named by its model field: a renamed
    field fails here, when the module loads, not in a query."""
    return f"s.{Session._meta.get_field(field).column}"


def _literal(choice) -> str:
    return f"'{choice.value}'"


_SUCCESS = _literal(Session.Outcome.SUCCESS)
_FAILURE = _literal(Session.Outcome.FAILURE)
_S_ID, _S_ORGANIZATION, _S_END_USER, _S_SCOPE, _S_SESSION_ID = map(
    _session_column, ("id", "organization", "end_user", "scope", "session_id")
)
_S_STATUS, _S_TAG, _S_OUTCOME, _S_SEALED_AT = map(_session_column, ("status", "session_tag", "outcome", "sealed_at"))
# The sessions whose outcomes count: sealed task sessions that ended in success or failure.
_COUNTED_SESSION = (
    f"{_S_STATUS} = {_literal(Session.Status.SEALED)} AND {_S_TAG} = {_literal(SessionTag.TASK)}"
    f" AND {_S_OUTCOME} IN ({_SUCCESS}, {_FAILURE})"
)
_SESSION_JOIN = f"""
    JOIN {_SESSIONS} s ON {_S_ORGANIZATION} = u.organization_id AND {_S_END_USER} = u.end_user_id
     AND {_S_SCOPE} = u.session_scope AND {_S_SESSION_ID} = u.session_id AND {_COUNTED_SESSION}
"""
# The columns each counted session contributes, under the names the per-user counts read.
_SESSION_ROW = f"{_S_END_USER} AS end_user_id, {_S_ID} AS session, {_S_OUTCOME} AS outcome, {_S_SEALED_AT} AS sealed_at"
# A retrieval of fifty skills charges its outcome only to the few the agent was likely to follow.
_COUNTED = "u.session_scope = u.scope AND (u.rank <= %s OR u.applied_at IS NOT NULL)"
# One user's ten sessions are one voice: the outcome most of them had, the latest on a tie.
_USER_SUCCEEDED = f"(wins > losses OR (wins = losses AND latest = {_SUCCESS}))"
_PER_USER_COLUMNS = f"""
    count(DISTINCT session) FILTER (WHERE outcome = {_SUCCESS}) AS wins,
    count(DISTINCT session) FILTER (WHERE outcome = {_FAILURE}) AS losses,
    (array_agg(outcome ORDER BY sealed_at DESC NULLS LAST, session DESC))[1] AS latest
"""


def wilson_interval(successes: int, trials: int, z: float = Z) -> tuple[float, float] | None:
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def review_z(users: int) -> float:
    return REVIEW_Z * math.sqrt(max(REVIEW_HORIZON / users, 1.0))


def newcombe_interval(s1: int, n1: int, s2: int, n2: int, z: float = Z) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval (his method 10) of p1 - p2."""
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
    """One skill's (or version's, or review window's) figures, counted in end users."""

    uses: int = 0
    applied: int = 0
    sessions: int = 0
    users: int = 0
    successes: int = 0
    failures: int = 0
    baseline_users: int = 0
    baseline_successes: int = 0

    @property
    def rate(self) -> float | None:
        return self.successes / self.users if self.users else None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_successes / self.baseline_users if self.baseline_users else None

    @property
    def lift(self) -> float | None:
        if self.rate is None or self.baseline_rate is None:
            return None
        return self.rate - self.baseline_rate

    def lift_interval(self, z: float = Z) -> tuple[float, float] | None:
        return newcombe_interval(self.successes, self.users, self.baseline_successes, self.baseline_users, z)

    def review_interval(self) -> tuple[float, float] | None:
        return self.lift_interval(review_z(self.users) if self.users else REVIEW_Z)

    def harmful(self) -> bool:
        """Review looks after every sealed session, so its interval widens while evidence is young
        (O'Brien-Fleming-shaped) to keep neutral skills sent to review near 5% (bench/skills/effect.py).
        Fewer failing users than it takes to share a lesson (apps.skills.trust) cannot take it away."""
        if self.users < settings.SKILL_REVIEW_MIN_USERS or self.failures < settings.SKILL_SHARE_MIN_USERS:
            return False
        interval = self.review_interval()
        return interval is not None and interval[1] < 0

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "success_rate": _rounded(self.rate),
            "success_rate_interval": _rounded_pair(wilson_interval(self.successes, self.users)),
            "baseline_rate": _rounded(self.baseline_rate),
            "lift": _rounded(self.lift),
            "lift_interval": _rounded_pair(self.lift_interval()),
        }

    def summary(self) -> str:
        interval, review = self.lift_interval(), self.review_interval()
        return (
            f"{self.successes} of {self.users} users whose task sessions retrieved it succeeded ({self.rate:.0%}; "
            f"{self.sessions} sessions, each user counted once), against {self.baseline_successes} of "
            f"{self.baseline_users} ({self.baseline_rate:.0%}) of the scope's users whose sessions did not: "
            f"lift {self.lift:+.2f}, 95% interval [{interval[0]:+.2f}, {interval[1]:+.2f}]; "
            f"review interval (z = {review_z(self.users):.2f}) [{review[0]:+.2f}, {review[1]:+.2f}]."
        )


class UseCounts(NamedTuple):
    uses: int = 0  # retrievals, counted or not
    applied: int = 0  # of which the agent reported applying the skill


class UserOutcomes(NamedTuple):
    sessions: int = 0
    users: int = 0
    successes: int = 0  # users who succeeded, one voice each


class UserCounts(NamedTuple):
    users: int = 0
    successes: int = 0


def _rounded(value):
    return None if value is None else round(value, 4)


def _rounded_pair(pair):
    return None if pair is None else [round(pair[0], 4), round(pair[1], 4)]


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _user_counts(key: str, sessions: str, params: list) -> dict:
    """{key: UserCounts} over the rows of `sessions` (key, end_user_id, session, outcome, sealed_at)."""
    rows = _fetch(
        f"""
        WITH per_user AS (
            SELECT {key}, {_PER_USER_COLUMNS} FROM ({sessions}) sessions GROUP BY {key}, end_user_id
        )
        SELECT {key}, count(*), count(*) FILTER (WHERE {_USER_SUCCEEDED}) FROM per_user GROUP BY {key}
        """,
        params,
    )
    return {value: UserCounts(users=users, successes=successes) for value, users, successes in rows}


def _use_counts(skill_id) -> dict:
    """{version or None (all): UseCounts}: every retrieval, counted or not."""
    rows = _fetch(
        f"""
        SELECT version, count(*), count(applied_at), GROUPING(version) FROM {_USES}
        WHERE skill_id = %s GROUP BY ROLLUP (version)
        """,
        [skill_id],
    )
    return {None if total else version: UseCounts(uses=uses, applied=applied) for version, uses, applied, total in rows}


def _user_outcomes(skill_id, *, since_version: int = 1) -> dict:
    """{version or None (all from `since_version`): UserOutcomes}."""
    rows = _fetch(
        f"""
        WITH counted AS (
            SELECT DISTINCT u.version, {_SESSION_ROW}
            FROM {_USES} u {_SESSION_JOIN}
            WHERE u.skill_id = %s AND u.version >= %s AND {_COUNTED}
        ), per_user AS (
            SELECT version, end_user_id, {_PER_USER_COLUMNS}
            FROM counted GROUP BY GROUPING SETS ((version, end_user_id), (end_user_id))
        )
        SELECT version, sum(wins + losses), count(*), count(*) FILTER (WHERE {_USER_SUCCEEDED})
        FROM per_user GROUP BY version
        """,
        [skill_id, since_version, settings.SKILL_EVIDENCE_TOP_RANKS],
    )
    return {
        version: UserOutcomes(sessions=int(sessions), users=users, successes=successes)
        for version, sessions, users, successes in rows
    }


def _baseline(skill: Skill) -> UserCounts:
    """Of the scope's users whose task sessions did not retrieve the skill."""
    return _scope_rates(skill.organization_id, [skill.scope], without_skill=skill.pk).get(skill.scope, UserCounts())


def _evidence(*, uses: UseCounts, outcomes: UserOutcomes, baseline: UserCounts) -> Evidence:
    return Evidence(
        uses=uses.uses,
        applied=uses.applied,
        sessions=outcomes.sessions,
        users=outcomes.users,
        successes=outcomes.successes,
        failures=outcomes.users - outcomes.successes,
        baseline_users=baseline.users,
        baseline_successes=baseline.successes,
    )


def skill_evidence(skill: Skill) -> tuple[Evidence, dict[int, Evidence]]:
    baseline = _baseline(skill)
    uses = _use_counts(skill.pk)
    outcomes = _user_outcomes(skill.pk)
    overall = _evidence(
        uses=uses.get(None, UseCounts()), outcomes=outcomes.get(None, UserOutcomes()), baseline=baseline
    )
    versions = {
        version: _evidence(uses=counts, outcomes=outcomes.get(version, UserOutcomes()), baseline=baseline)
        for version, counts in uses.items()
        if version is not None
    }
    return overall, dict(sorted(versions.items(), reverse=True))


def review_evidence(skill: Skill) -> tuple[Evidence, int]:
    # Evidence before a person's latest approval does not count towards review: they looked since.
    approved = SkillVersion.objects.filter(skill=skill, operation=SkillVersion.Operation.APPROVE).aggregate(
        version=Max("version")
    )["version"]
    since = approved or 1
    uses = _use_counts(skill.pk)
    in_window = [counts for version, counts in uses.items() if version is not None and version >= since]
    use_counts = UseCounts(
        uses=sum(counts.uses for counts in in_window), applied=sum(counts.applied for counts in in_window)
    )
    outcomes = _user_outcomes(skill.pk, since_version=since).get(None, UserOutcomes())
    return _evidence(uses=use_counts, outcomes=outcomes, baseline=_baseline(skill)), since


def skill_effectiveness(skill: Skill) -> dict:
    overall, versions = skill_evidence(skill)
    window, since = review_evidence(skill)
    feedback = _fetch(f"SELECT verdict, count(*) FROM {_FEEDBACK} WHERE skill_id = %s GROUP BY verdict", [skill.pk])
    return {
        **overall.as_dict(),
        "feedback": dict.fromkeys(SkillFeedback.Verdict.values, 0) | dict(feedback),
        "versions": [{"version": version, **evidence.as_dict()} for version, evidence in versions.items()],
        "review": {"since_version": since, **window.as_dict(), "harmful": window.harmful()},
    }


@dataclass(frozen=True)
class Adjustment:
    factor: float
    reason: str


def _scope_rates(organization_id, scopes: list[str], *, without_skill=None) -> dict[str, UserCounts]:
    """Of the scopes' users with sealed task sessions (none of which retrieved `without_skill`)."""
    unretrieved = f"""AND NOT EXISTS (SELECT 1 FROM {_USES} u WHERE u.skill_id = %s
        AND u.organization_id = {_S_ORGANIZATION} AND u.end_user_id = {_S_END_USER}
        AND u.session_scope = {_S_SCOPE} AND u.session_id = {_S_SESSION_ID})"""
    sessions = f"""
        SELECT {_S_SCOPE} AS scope, {_SESSION_ROW} FROM {_SESSIONS} s
        WHERE {_S_ORGANIZATION} = %s AND {_S_SCOPE} = ANY(%s) AND {_COUNTED_SESSION}
          {unretrieved if without_skill else ""}
    """
    return _user_counts("scope", sessions, [organization_id, scopes, *([without_skill] if without_skill else [])])


def _skill_outcomes(skill_ids: list) -> dict:
    sessions = f"""
        SELECT DISTINCT u.skill_id, {_SESSION_ROW}
        FROM {_USES} u {_SESSION_JOIN} WHERE u.skill_id = ANY(%s::uuid[]) AND {_COUNTED}
    """
    return _user_counts(
        "skill_id", sessions, [[str(skill_id) for skill_id in skill_ids], settings.SKILL_EVIDENCE_TOP_RANKS]
    )


def _cached_many(prefix: str, keys: list, compute) -> dict:
    """Kept briefly: evidence moves with sealed sessions, not with every retrieval."""
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
    """(factor, shrunk rate): the rate shrunk towards the scope's by `prior` outcomes, its lift through
    tanh within 1 ± weight; 1 while the skill's Wilson interval still holds the scope's rate."""
    shrunk = (successes + prior * scope_rate) / (sessions + prior)
    low, high = wilson_interval(successes, sessions) or (0.0, 1.0)
    if low <= scope_rate <= high:
        # Relevance scores of neighbouring ranks differ by a few per cent (rank fusion), so even a small
        # factor reorders them: outcomes move a skill only once they tell it apart from its scope.
        return 1.0, shrunk
    return 1 + weight * math.tanh((shrunk - scope_rate) / LIFT_SCALE), shrunk


def ranking_adjustments(skills: list[Skill]) -> dict:
    """{skill id: Adjustment}: a factor within 1 ± SKILL_EFFECTIVENESS_WEIGHT on the relevance score."""
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
        scope_users, scope_successes = rates.get(skill.scope) or (0, 0)
        users, successes = outcomes.get(skill.pk) or (0, 0)
        if not users or not scope_users:
            adjustments[skill.pk] = Adjustment(1.0, "no task outcomes yet")
            continue
        centre = scope_successes / scope_users
        factor, shrunk = effectiveness_factor(
            successes=successes, sessions=users, scope_rate=centre, weight=weight, prior=prior
        )
        observed = f"{successes} of {users} users succeeded ({successes / users:.0%})"
        if factor == 1.0:
            low, high = wilson_interval(successes, users)
            reason = f"{observed}; not yet told apart from the scope's {centre:.0%} (95% interval {low:.0%}-{high:.0%})"
        else:
            reason = (
                f"{observed} against the scope's {centre:.0%}; shrunk estimate {shrunk:.0%} (prior of {prior} users)"
            )
        adjustments[skill.pk] = Adjustment(round(factor, 4), reason)
    return adjustments


def failure_notes(skills: list[Skill]) -> dict:
    """{skill id: a sentence on its failing users}: evolution's `worth_avoiding` context."""
    if not skills:
        return {}
    outcomes = _skill_outcomes([skill.pk for skill in skills])
    rates = _scope_rates(skills[0].organization_id, sorted({skill.scope for skill in skills}))
    notes = {}
    for skill in skills:
        users, successes = outcomes.get(skill.pk) or (0, 0)
        if users == successes:
            continue
        scope_users, scope_successes = rates.get(skill.scope) or (0, 0)
        notes[skill.pk] = (
            f"{users - successes} of {users} users whose task sessions retrieved it failed"
            + (f" (the scope's users succeed {scope_successes / scope_users:.0%} of the time)" if scope_users else "")
            + ("; it waits for a person's review" if skill.status == Skill.Status.PENDING_REVIEW else "")
        )
    return notes


# Per-user outcomes of the changelist row's skill (the outer query's skill table).
_PER_USER_OF_EACH_SKILL = f"""(SELECT {_PER_USER_COLUMNS} FROM (
    SELECT DISTINCT {_SESSION_ROW} FROM {_USES} u {_SESSION_JOIN}
    WHERE u.skill_id = {_SKILLS}.id AND {_COUNTED}) counted GROUP BY end_user_id) per_user"""


def users_sql() -> tuple[str, list]:
    return f"(SELECT count(*) FROM {_PER_USER_OF_EACH_SKILL})", [settings.SKILL_EVIDENCE_TOP_RANKS]


def success_rate_sql() -> tuple[str, list]:
    return (
        f"(SELECT avg(CASE WHEN {_USER_SUCCEEDED} THEN 1.0 ELSE 0.0 END) FROM {_PER_USER_OF_EACH_SKILL})",
        [settings.SKILL_EVIDENCE_TOP_RANKS],
    )


def outcomes_over_time(skill: Skill, *, weeks: int = 12) -> list[tuple]:
    """[(week start, successes, failures)] of its counted sessions, the last `weeks` weeks that had any."""
    rows = _fetch(
        f"""
        SELECT date_trunc('week', {_S_SEALED_AT}) AS week,
               count(DISTINCT {_S_ID}) FILTER (WHERE {_S_OUTCOME} = {_SUCCESS}),
               count(DISTINCT {_S_ID}) FILTER (WHERE {_S_OUTCOME} = {_FAILURE})
        FROM {_USES} u {_SESSION_JOIN} WHERE u.skill_id = %s AND {_COUNTED}
        GROUP BY week ORDER BY week DESC LIMIT %s
        """,
        [skill.pk, settings.SKILL_EVIDENCE_TOP_RANKS, weeks],
    )
    return list(reversed(rows))
