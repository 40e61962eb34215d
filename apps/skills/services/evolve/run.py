"""One evolution run and its queueing. The plan is made outside any transaction, so a slow model
holds no row lock, then committed in one that skips a skill changed meanwhile."""

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, When

from apps.pipeline.locks import advisory_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue_debounced
from apps.providers.embeddings import embed_texts
from apps.providers.llm import llm_enabled
from apps.skills.models import ExperienceType, Skill, SkillExperience, SkillVersion
from apps.skills.services.evolve.llm import llm_operations
from apps.skills.services.evolve.rules import rule_drafts
from apps.skills.services.skills import evolved_status, skill_announce, skill_archive, skill_create, skill_update
from apps.skills.trust import may_reach

logger = logging.getLogger(__name__)

EVOLVE_SKILLS = "evolve_skills"


def evolve_key(*, organization, scope: str) -> str:
    """The idempotency key of its waiting task and its lock."""
    return _evolve_key(organization.pk, scope)


def _evolve_key(organization_id, scope: str) -> str:
    return f"evolve:{organization_id}:{scope}"


def evolve_locks(work) -> list[str]:
    """The evolution locks of a pipeline.locks.WorkOf (registered in SkillsConfig.ready)."""
    return [_evolve_key(work.organization_id, scope) for scope in work.scopes]


def evolve_enqueue(*, organization, scope: str) -> MemoryTask:
    """One waiting evolution per organisation and scope; while one runs, one follow-up waits."""
    return enqueue_debounced(
        EVOLVE_SKILLS,
        {"scope": scope},
        key=evolve_key(organization=organization, scope=scope),
        delay=settings.EVOLUTION_DEBOUNCE_SECONDS,
        organization=organization,
        scope=scope,
    )


def edit_budget(*, avoiding: int, learning: int) -> int:
    return max(1, min(settings.EVOLUTION_MAX_EDITS, round(1 + 1.0 * avoiding + 0.5 * learning)))


def pending_experiences(*, organization, scope: str) -> list[SkillExperience]:
    """Pending experiences, best first, then those held for corroboration (a new one may corroborate them)."""
    return list(
        SkillExperience.objects.filter(
            organization=organization,
            scope=scope,
            status__in=[SkillExperience.Status.PENDING, SkillExperience.Status.HELD],
        )
        .annotate(
            rank=F("importance") * F("credibility"),
            waiting=Case(When(status=SkillExperience.Status.HELD, then=1), default=0),
        )
        .order_by("waiting", "-rank", "created_at", "id")
        .select_related("session")
        .defer("embedding", "search_vector")[: settings.EVOLUTION_MAX_EXPERIENCES]
    )


@dataclass
class Change:
    """A creation (skill None), an edit of `skill`, or a merge into it that archives `merged` first."""

    skill: Skill | None
    fields: dict
    experiences: list
    reason: str
    kind: str
    merged: list = field(default_factory=list)
    embedding: list | None = None


def _draft_changes(drafts: dict) -> list[Change]:
    return [
        Change(
            skill=draft.skill,
            fields=draft.fields,
            experiences=draft.experiences,
            reason="; ".join(draft.reasons)[:2000],
            kind="created" if draft.skill is None else "edited",
        )
        for draft in drafts.values()
        if draft.experiences
    ]


def _operation_changes(operations: list) -> list[Change]:
    changes = []
    for operation in operations:
        if operation.get("deferred"):
            continue
        experiences = operation["experiences"]
        reason = "; ".join(experience.title for experience in experiences)[:2000]
        merged = []
        if operation["op"] == "create":
            skill, fields, kind = None, operation["fields"], "created"
        elif operation["op"] == "edit":
            skill, fields, kind = operation["skill"], operation["changes"], "edited"
        else:
            skill, *merged = operation["sources"]
            fields, kind = dict(operation["fields"]), "merged"
            reason = f"merge of {', '.join(source.name for source in operation['sources'])}: {reason}"
        changes.append(
            Change(skill=skill, fields=fields, experiences=experiences, reason=reason, kind=kind, merged=merged)
        )
    return changes


def _trusted(changes: list[Change]) -> tuple[list[Change], set]:
    """(changes that may be served, ids of experiences held): a new skill is served only to its teachers,
    but a change of an existing one may reach anyone, so it waits for corroboration (apps.skills.trust)."""
    kept, held = [], set()
    for change in changes:
        if change.skill is None or may_reach(experiences=change.experiences, audience_ids=None):
            kept.append(change)
        else:
            held |= {experience.pk for experience in change.experiences}
    return kept, held


def _embed_changes(changes: list[Change]) -> None:
    """In the order the changes apply: two changes of one skill build on each other."""
    texts, changed = {}, []
    for change in changes:
        if change.skill is None:
            before = ("", "")
        else:
            before = texts.get(change.skill.pk, (change.skill.description, change.skill.instructions))
        after = (change.fields.get("description", before[0]), change.fields.get("instructions", before[1]))
        if change.skill is not None:
            texts[change.skill.pk] = after
        if change.skill is None or after != before:
            changed.append((change, Skill(description=after[0], instructions=after[1]).embedding_text()))
    for (change, _), vector in zip(changed, embed_texts([text for _, text in changed])):
        change.embedding = vector


def _current(changes: list[Change]) -> tuple[list[Change], list[Change]]:
    """(changes to apply, changes skipped): a skill whose version moved since planning is skipped."""
    planned = {skill.pk: skill for change in changes for skill in [change.skill, *change.merged] if skill is not None}
    locked = {skill.pk: skill for skill in Skill.objects.select_for_update().filter(pk__in=list(planned))}
    moved = {pk for pk, skill in planned.items() if pk not in locked or locked[pk].version != skill.version}
    current, skipped = [], []
    for change in changes:
        skills = [skill.pk for skill in [change.skill, *change.merged] if skill is not None]
        if moved.intersection(skills):
            skipped.append(change)
            continue
        if change.skill is not None:
            change.skill = locked[change.skill.pk]
        change.merged = [locked[skill.pk] for skill in change.merged]
        current.append(change)
    return current, skipped


def _apply(*, organization, scope: str, changes: list[Change], actor: str, report: dict) -> None:
    for change in changes:
        if change.skill is None:
            skill = skill_create(
                organization=organization,
                scope=scope,
                fields=change.fields,
                actor=actor,
                reason=change.reason,
                experiences=change.experiences,
                embedding=change.embedding,
            )
            report["created"].append(skill.name)
            skill_announce(skill=skill)
            continue
        for other in change.merged:
            skill_archive(
                skill=other, actor=actor, reason=f"merged into {change.skill.name}", experiences=change.experiences
            )
        version = change.skill.version
        skill = skill_update(
            skill=change.skill,
            changes=change.fields,
            actor=actor,
            reason=change.reason,
            experiences=change.experiences,
            status=evolved_status(),
            embedding=change.embedding,
            operation=SkillVersion.Operation.MERGE if change.kind == "merged" else SkillVersion.Operation.EDIT,
        )
        report[change.kind].append(change.skill.name)
        if skill.version != version:
            skill_announce(skill=skill)


def _mark(experience_ids, status: str) -> int:
    if not experience_ids:
        return 0
    waiting = [SkillExperience.Status.PENDING, SkillExperience.Status.HELD]
    return (
        SkillExperience.objects.filter(pk__in=list(experience_ids), status__in=waiting)
        .exclude(status=status)
        .update(status=status)
    )


def _experience_ids(changes: list[Change]) -> set:
    return {experience.pk for change in changes for experience in change.experiences}


def skills_evolve(*, organization, scope: str, task=None) -> dict:
    """Run it under evolve_key (the handler does)."""
    pending = pending_experiences(organization=organization, scope=scope)
    if not pending:
        return {"experiences": 0, "consumed": 0, "superseded": 0, "held": 0, "remaining": 0}
    avoiding = sum(1 for e in pending if e.experience_type == ExperienceType.WORTH_AVOIDING)
    budget = edit_budget(avoiding=avoiding, learning=len(pending) - avoiding)
    problems: list[str] = []
    use_llm = llm_enabled()
    if use_llm:
        actor = f"evolution:llm:{settings.LLM_MODEL}"
        operations, problems, usable = llm_operations(
            organization=organization, scope=scope, pending=pending, budget=budget, task=task
        )
        changes, held = _trusted(_operation_changes(operations))
        deferred = {e.pk for op in operations if op.get("deferred") for e in op["experiences"]}
        report = {"created": [], "edited": [], "merged": []}
    else:
        actor = "evolution:rules"
        drafts, superseded, held = rule_drafts(organization=organization, scope=scope, pending=pending, budget=budget)
        changes = _draft_changes(drafts)
        report = {"created": [], "edited": []}
    _embed_changes(changes)

    with transaction.atomic():
        changes, skipped = _current(changes)
        _apply(organization=organization, scope=scope, changes=changes, actor=actor, report=report)
        used = _experience_ids(changes)
        if use_llm:
            # An unusable answer decides nothing: every experience waits for the next run.
            deferred |= _experience_ids(skipped) - used
            superseded = {e.pk for e in pending} - used - deferred - held if usable and not problems else set()
        consumed = _mark(used, SkillExperience.Status.CONSUMED)
        superseded_count = _mark(superseded - used - held, SkillExperience.Status.SUPERSEDED)
        held_count = _mark(held - used, SkillExperience.Status.HELD)
    problems += [f"{change.skill.name} changed during the run; its change waits for the next run" for change in skipped]
    remaining = SkillExperience.objects.filter(
        organization=organization, scope=scope, status=SkillExperience.Status.PENDING
    ).count()
    if problems:
        logger.info(
            "evolution of %s/%s: %s problem(s) with the evolver's answer", organization.pk, scope, len(problems)
        )
    return {
        "experiences": len(pending),
        "budget": budget,
        **report,
        "consumed": consumed,
        "superseded": superseded_count,
        "held": held_count,
        "remaining": remaining,
        "problems": problems,
    }


def skills_evolve_locked(*, organization, scope: str, task=None) -> dict:
    with advisory_lock(evolve_key(organization=organization, scope=scope), wait=False):
        return skills_evolve(organization=organization, scope=scope, task=task)
