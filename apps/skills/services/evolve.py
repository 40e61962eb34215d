"""Evolution: pending experiences of one organisation and scope become skill creations and edits.

Experiences are ranked by importance × credibility (at most EVOLUTION_MAX_EXPERIENCES per
run) and a run changes at most `edit_budget` skills. Consumed experiences made a change;
superseded ones were reviewed and added nothing; the rest stay pending for the next run.
Nothing is ever deleted: a merge archives its sources with a recorded version.
"""

import difflib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.pipeline.locks import advisory_lock
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue
from apps.providers.embeddings import embed_texts
from apps.providers.llm import LLMOutputError, chat_json, llm_enabled
from apps.skills.models import ExperienceType, Skill, SkillExperience, SkillVersion
from apps.skills.services.rule_distiller import workflow_request, workflow_steps, workflow_title
from apps.skills.services.skills import evolved_status, skill_archive, skill_create, skill_slug, skill_update

logger = logging.getLogger(__name__)

MAX_TRIGGERS = 20
MAX_EXAMPLES = 5
MAX_CAVEATS = 8
MAX_CAVEAT_TARGETS = 3
CAVEATS_HEADER = "Caveats:"
TEXT_LIMITS = {"description": 1000, "instructions": 8000}
TRIGGER_MAX_CHARS = 300
DESCRIPTION_REQUEST_MAX_CHARS = 200
CAVEAT_MAX_CHARS = 400
SKILLS_IN_PROMPT = 30
_DIGITS = re.compile(r"\d+")


def edit_budget(*, avoiding: int, learning: int) -> int:
    return max(1, min(settings.EVOLUTION_MAX_EDITS, round(1 + 1.0 * avoiding + 0.5 * learning)))


def pending_experiences(*, organization, scope: str) -> list[SkillExperience]:
    return list(
        SkillExperience.objects.filter(organization=organization, scope=scope, status=SkillExperience.Status.PENDING)
        .annotate(rank=F("importance") * F("credibility"))
        .order_by("-rank", "created_at", "id")
        .select_related("session")
        .defer("embedding", "search_vector")[: settings.EVOLUTION_MAX_EXPERIENCES]
    )


@dataclass
class Draft:
    """The changes one run makes to one skill (new when skill is None), written as one version."""

    skill: Skill | None
    fields: dict
    experiences: list = field(default_factory=list)
    reasons: list = field(default_factory=list)

    def get(self, name):
        if name in self.fields:
            return self.fields[name]
        return getattr(self.skill, name) if self.skill is not None else None


# The rule-based evolver -------------------------------------------------------------------------


def _humanise(tool: str) -> str:
    return tool.replace("_", " ")


def _workflow_fields(signature: list[str], steps: list[str], request: str) -> dict:
    example = f' Used for requests such as "{request[:DESCRIPTION_REQUEST_MAX_CHARS]}".' if request else ""
    return {
        "name": skill_slug("-".join(signature)),
        "description": f"Workflow that solved a task by calling {', then '.join(_humanise(tool) for tool in signature)}.{example}",
        "instructions": "Steps:\n" + "\n".join(steps),
        "entry_type": Skill.EntryType.WORKFLOW,
        "triggers": [],
        "examples": [],
        "action_signature": list(signature),
    }


def _add_caveat(instructions: str, line: str) -> str | None:
    """The instructions with one more caveat line, or None when it is already there or the list is full."""
    key = _DIGITS.sub("#", line.lower())
    body, _, caveats = instructions.partition(f"\n\n{CAVEATS_HEADER}\n")
    existing = [item for item in caveats.splitlines() if item.startswith("- ")]
    if any(_DIGITS.sub("#", item.lower()) == key for item in existing) or len(existing) >= MAX_CAVEATS:
        return None
    return f"{body}\n\n{CAVEATS_HEADER}\n" + "\n".join([*existing, line])


def _caveat_text(experience: SkillExperience) -> str:
    return " ".join(experience.content.split())[:CAVEAT_MAX_CHARS]


def _caveat_line(experience: SkillExperience) -> str:
    return f"- {_caveat_text(experience)}"


def copied_texts(experience: SkillExperience) -> list[str]:
    """The texts of an experience the rule evolver copies into a skill, cut as it cuts them: the
    request (into the description, the triggers and the examples), the caveat line and the title
    (into the version's reason). Erasure scrubs them."""
    request = workflow_request(experience.content)
    return [
        experience.title, request[:DESCRIPTION_REQUEST_MAX_CHARS], request[:TRIGGER_MAX_CHARS], _caveat_text(experience),
    ]


class _TitleGroups:
    """Workflow groups by the embedding of their titles, for lessons whose exact action
    signature matches nothing (the same procedure reached with a different tool sequence)."""

    def __init__(self, *, workflows: list[Skill], experiences: list[SkillExperience]):
        titles = [workflow_title(skill.action_signature) for skill in workflows]
        titles += [experience.title for experience in experiences]
        vectors = embed_texts(titles) if titles else []
        self.vectors = {experience.pk: vector for experience, vector in zip(experiences, vectors[len(workflows):])}
        self.groups = [(vector, str(skill.pk), skill) for skill, vector in zip(workflows, vectors)]

    def add(self, experience: SkillExperience, *, key: str, skill: Skill | None) -> None:
        if all(group_key != key for _, group_key, _ in self.groups):
            self.groups.append((self.vectors[experience.pk], key, skill))

    def match(self, experience: SkillExperience, *, default: tuple) -> tuple:
        vector = self.vectors[experience.pk]
        best, best_similarity = default, settings.EVOLUTION_TITLE_SIMILARITY
        for group_vector, key, skill in self.groups:
            similarity = sum(a * b for a, b in zip(vector, group_vector))
            if similarity >= best_similarity:
                best, best_similarity = (key, skill), similarity
        return best


def rule_drafts(*, organization, scope: str, pending: list[SkillExperience], budget: int) -> tuple[dict, set]:
    """Drafts keyed by skill (id or new name) and the ids of experiences that added nothing."""
    live = list(
        Skill.objects.filter(organization=organization, scope=scope).exclude(status=Skill.Status.ARCHIVED).defer("embedding")
    )
    drafts: dict[str, Draft] = {}
    superseded: set = set()

    def draft_for(key: str, skill: Skill | None, fields: dict | None = None) -> Draft | None:
        if key not in drafts:
            if len(drafts) >= budget:
                return None
            drafts[key] = Draft(skill=skill, fields=fields or {})
        return drafts[key]

    workflows = {tuple(skill.action_signature): skill for skill in live if skill.entry_type == Skill.EntryType.WORKFLOW}
    learning = [
        experience for experience in pending
        if experience.experience_type == ExperienceType.WORTH_LEARNING and experience.action_signature
    ]
    similar = _TitleGroups(workflows=list(workflows.values()), experiences=learning)
    for experience in learning:
        signature = tuple(experience.action_signature)
        skill = workflows.get(signature)
        key = str(skill.pk) if skill else "new:" + "/".join(signature)
        if skill is None and key not in drafts:
            # No workflow with this exact signature: join one whose title says the same thing.
            key, skill = similar.match(experience, default=(key, None))
        similar.add(experience, key=key, skill=skill)
        fields = None if skill else _workflow_fields(
            list(signature), workflow_steps(experience.content), workflow_request(experience.content)
        )
        draft = draft_for(key, skill, fields)
        if draft is None:
            continue  # over budget: stays pending
        request = workflow_request(experience.content)[:TRIGGER_MAX_CHARS]
        triggers = list(draft.get("triggers") or [])
        if not request or request in triggers:
            superseded.add(experience.pk)
            continue
        if len(triggers) < MAX_TRIGGERS:
            draft.fields["triggers"] = [*triggers, request]
        examples = list(draft.get("examples") or [])
        if len(examples) < MAX_EXAMPLES:
            session_id = experience.session.session_id if experience.session_id else None
            draft.fields["examples"] = [*examples, {"request": request, "steps": list(signature), "session_id": session_id}]
        draft.experiences.append(experience)
        draft.reasons.append(f"workflow seen again: {experience.title}" if skill else f"new workflow: {experience.title}")

    for experience in pending:
        if experience.experience_type != ExperienceType.WORTH_AVOIDING or not experience.action_signature:
            continue
        tool = experience.action_signature[0]
        targets = [(str(skill.pk), skill) for skill in live if skill.entry_type == Skill.EntryType.WORKFLOW and tool in skill.action_signature]
        targets.sort(key=lambda item: -item[1].retrieval_count)
        targets += [(key, None) for key, draft in drafts.items() if draft.skill is None and tool in (draft.get("action_signature") or [])]
        if not targets:
            guide = next((skill for skill in live if skill.entry_type == Skill.EntryType.GUIDE and skill.action_signature == [tool]), None)
            targets = [(str(guide.pk) if guide else f"new:guide:{tool}", guide)]
        used = False
        for key, skill in targets[:MAX_CAVEAT_TARGETS]:
            fields = None
            if skill is None and key not in drafts:
                fields = {
                    "name": skill_slug(f"{tool}-pitfalls"),
                    "description": f"Known pitfalls of calling {_humanise(tool)} and how to avoid them.",
                    "instructions": f"Before calling {tool}, check its arguments against earlier tool results.",
                    "entry_type": Skill.EntryType.GUIDE,
                    "triggers": [f"{_humanise(tool)} error"],
                    "examples": [],
                    "action_signature": [tool],
                }
            draft = draft_for(key, skill, fields)
            if draft is None:
                continue
            instructions = _add_caveat(draft.get("instructions") or "", _caveat_line(experience))
            if instructions is None:
                continue
            draft.fields["instructions"] = instructions
            draft.experiences.append(experience)
            draft.reasons.append(f"caveat: {experience.title}")
            used = True
        if not used and all(key in drafts or len(drafts) < budget for key, _ in targets[:MAX_CAVEAT_TARGETS]):
            superseded.add(experience.pk)
    return drafts, superseded


# The LLM evolver -------------------------------------------------------------------------------

EVOLVER_PROMPT = """You maintain a library of procedural skills for AI agents, learned from experiences.
Given new experiences (E1, E2, ...) and the existing skills, return a JSON object {"operations": [...]} with at most
BUDGET operations. Each operation is one of:
- {"op": "create", "name": slug, "description": str, "instructions": str, "triggers": [str], "examples": [object],
   "entry_type": "workflow"|"guide"|"script", "experiences": ["E1", ...]}
- {"op": "edit", "skill": existing skill name, "changes": {only the fields that change: description, instructions,
   triggers, examples, entry_type}, "experiences": [...]}  Prefer small edits; a large rewrite is refused.
- {"op": "merge", "skills": [two or more existing names], "into": {"name", "description", "instructions", "triggers",
   "examples", "entry_type"}, "experiences": [...]}
There is no delete. Leave out experiences that add nothing new. Never put personal data into a skill."""


class OperationError(ValueError):
    pass


def _text(value, name: str, *, required: bool = True) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise OperationError(f"{name} must be a non-empty string")
    return value.strip()[: TEXT_LIMITS.get(name, 1000)]


def _string_list(value, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise OperationError(f"{name} must be a list of strings")
    return [item.strip()[:TRIGGER_MAX_CHARS] for item in value if item.strip()][:MAX_TRIGGERS]


def _examples(value) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise OperationError("examples must be a list of objects")
    return value[:MAX_EXAMPLES]


def _entry_type(value) -> str:
    if value not in Skill.EntryType.values:
        raise OperationError(f"unknown entry_type {value!r}")
    return value


def _full_fields(data) -> dict:
    if not isinstance(data, dict):
        raise OperationError("the skill must be an object")
    return {
        "name": skill_slug(_text(data.get("name"), "name")),
        "description": _text(data.get("description"), "description"),
        "instructions": _text(data.get("instructions"), "instructions"),
        "triggers": _string_list(data.get("triggers", []), "triggers"),
        "examples": _examples(data.get("examples", [])),
        "entry_type": _entry_type(data.get("entry_type", Skill.EntryType.GUIDE)),
    }


def _is_small_edit(old: str, new: str) -> bool:
    if not old:
        return True
    return difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() >= settings.EVOLUTION_MIN_EDIT_SIMILARITY


def validate_operation(raw, *, skills_by_name: dict, labels: dict) -> dict:
    """A checked operation {op, experiences, ...}; raises OperationError naming what is wrong."""
    if not isinstance(raw, dict):
        raise OperationError("an operation must be an object")
    op = raw.get("op")
    refs = raw.get("experiences", [])
    if not isinstance(refs, list) or not refs or any(ref not in labels for ref in refs):
        raise OperationError(f"{op}: experiences must name experiences of this batch")
    experiences = [labels[ref] for ref in dict.fromkeys(refs)]
    if op == "create":
        return {"op": op, "fields": _full_fields(raw), "experiences": experiences}
    if op == "edit":
        skill = skills_by_name.get(raw.get("skill"))
        if skill is None:
            raise OperationError(f"edit: no live skill named {raw.get('skill')!r}")
        changes_in = raw.get("changes")
        if not isinstance(changes_in, dict) or not changes_in:
            raise OperationError("edit: changes must be a non-empty object")
        changes = {}
        for name, value in changes_in.items():
            if name in ("description", "instructions"):
                value = _text(value, name)
                if not _is_small_edit(getattr(skill, name), value):
                    raise OperationError(f"edit of {skill.name}: the new {name} is a rewrite, not an edit")
                changes[name] = value
            elif name == "triggers":
                changes[name] = _string_list(value, name)
            elif name == "examples":
                changes[name] = _examples(value)
            elif name == "entry_type":
                changes[name] = _entry_type(value)
            else:
                raise OperationError(f"edit: field {name!r} cannot be edited")
        return {"op": op, "skill": skill, "changes": changes, "experiences": experiences}
    if op == "merge":
        names = raw.get("skills")
        if not isinstance(names, list) or len(set(map(str, names))) < 2:
            raise OperationError("merge: skills must name two or more skills")
        sources = [skills_by_name.get(name) for name in dict.fromkeys(names)]
        if any(source is None for source in sources):
            raise OperationError("merge: every skill must be a live skill of this scope")
        return {"op": op, "sources": sources, "fields": _full_fields(raw.get("into")), "experiences": experiences}
    raise OperationError(f"unknown operation {op!r} (there is no delete)")


def llm_operations(*, organization, scope: str, pending: list, budget: int, task=None) -> tuple[list[dict], list[str], bool]:
    """(valid operations within the budget, problems, whether the answer was usable)."""
    labels = {f"E{index}": experience for index, experience in enumerate(pending, start=1)}
    skills = list(
        Skill.objects.filter(organization=organization, scope=scope)
        .exclude(status=Skill.Status.ARCHIVED)
        .order_by("-retrieval_count", "-updated_at")
        .defer("embedding")[:SKILLS_IN_PROMPT]
    )
    skills_by_name = {skill.name: skill for skill in skills}
    experiences_text = "\n".join(
        f"{label} [{experience.experience_type}, credibility {experience.credibility:.2f}] {experience.title}\n"
        f"   {experience.content[:1500]}"
        for label, experience in labels.items()
    )
    skills_text = "\n".join(
        json.dumps(
            {"name": s.name, "description": s.description, "instructions": s.instructions[:1500], "triggers": s.triggers},
            ensure_ascii=False,
        )
        for s in skills
    ) or "(none)"
    messages = [
        {"role": "system", "content": EVOLVER_PROMPT.replace("BUDGET", str(budget))},
        {"role": "user", "content": f"Existing skills:\n{skills_text}\n\nNew experiences:\n{experiences_text}"},
    ]
    try:
        data = chat_json(messages=messages, organization=organization, task=task, purpose="evolve")
    except LLMOutputError as exc:
        return [], [str(exc)], False
    raw_operations = data.get("operations")
    if not isinstance(raw_operations, list):
        return [], ['The answer has no "operations" list.'], False
    operations, problems = [], []
    for index, raw in enumerate(raw_operations):
        try:
            operation = validate_operation(raw, skills_by_name=skills_by_name, labels=labels)
        except OperationError as exc:
            problems.append(f"operation {index}: {exc}")
            continue
        if len(operations) >= budget:
            problems.append(f"operation {index}: over the edit budget of {budget}")
            operation["deferred"] = True
        operations.append(operation)
    return operations, problems, True


# The run ---------------------------------------------------------------------------------------


def _mark(experience_ids, status: str) -> int:
    if not experience_ids:
        return 0
    return SkillExperience.objects.filter(pk__in=list(experience_ids), status=SkillExperience.Status.PENDING).update(
        status=status
    )


def _apply_drafts(*, organization, scope: str, drafts: dict, actor: str) -> dict:
    created, edited = [], []
    for draft in drafts.values():
        if not draft.experiences:
            continue
        reason = "; ".join(draft.reasons)[:2000]
        if draft.skill is None:
            skill = skill_create(
                organization=organization, scope=scope, fields=draft.fields, actor=actor, reason=reason,
                experiences=draft.experiences,
            )
            created.append(skill.name)
        else:
            skill_update(
                skill=draft.skill, changes=draft.fields, actor=actor, reason=reason, experiences=draft.experiences,
                status=evolved_status(),
            )
            edited.append(draft.skill.name)
    return {"created": created, "edited": edited}


def _apply_operations(*, organization, scope: str, operations: list, actor: str) -> dict:
    created, edited, merged = [], [], []
    for operation in operations:
        if operation.get("deferred"):
            continue
        experiences = operation["experiences"]
        reason = "; ".join(experience.title for experience in experiences)[:2000]
        if operation["op"] == "create":
            skill = skill_create(
                organization=organization, scope=scope, fields=operation["fields"], actor=actor, reason=reason,
                experiences=experiences,
            )
            created.append(skill.name)
        elif operation["op"] == "edit":
            skill_update(
                skill=operation["skill"], changes=operation["changes"], actor=actor, reason=reason,
                experiences=experiences, status=evolved_status(),
            )
            edited.append(operation["skill"].name)
        else:
            target, *others = operation["sources"]
            for other in others:
                skill_archive(skill=other, actor=actor, reason=f"merged into {target.name}", experiences=experiences)
            fields = dict(operation["fields"])
            skill_update(
                skill=target, changes=fields, actor=actor, reason=f"merge of {', '.join(s.name for s in operation['sources'])}: {reason}",
                experiences=experiences, status=evolved_status(), operation=SkillVersion.Operation.MERGE,
            )
            merged.append(target.name)
    return {"created": created, "edited": edited, "merged": merged}


def skills_evolve(*, organization, scope: str, task=None) -> dict:
    """One evolution run for an organisation and scope. Run it under evolve_key (the handler does)."""
    pending = pending_experiences(organization=organization, scope=scope)
    if not pending:
        return {"experiences": 0, "consumed": 0, "superseded": 0, "remaining": 0}
    avoiding = sum(1 for e in pending if e.experience_type == ExperienceType.WORTH_AVOIDING)
    budget = edit_budget(avoiding=avoiding, learning=len(pending) - avoiding)
    problems: list[str] = []
    with transaction.atomic():
        if llm_enabled():
            actor = f"evolution:llm:{settings.LLM_MODEL}"
            operations, problems, usable = llm_operations(
                organization=organization, scope=scope, pending=pending, budget=budget, task=task
            )
            changes = _apply_operations(organization=organization, scope=scope, operations=operations, actor=actor)
            used = {e.pk for op in operations if not op.get("deferred") for e in op["experiences"]}
            deferred = {e.pk for op in operations if op.get("deferred") for e in op["experiences"]}
            # An unusable answer decides nothing: every experience waits for the next run.
            superseded = {e.pk for e in pending} - used - deferred if usable and not problems else set()
        else:
            actor = "evolution:rules"
            drafts, superseded = rule_drafts(organization=organization, scope=scope, pending=pending, budget=budget)
            changes = _apply_drafts(organization=organization, scope=scope, drafts=drafts, actor=actor)
            used = {e.pk for draft in drafts.values() for e in draft.experiences}
        consumed = _mark(used, SkillExperience.Status.CONSUMED)
        superseded_count = _mark(superseded - used, SkillExperience.Status.SUPERSEDED)
    remaining = SkillExperience.objects.filter(
        organization=organization, scope=scope, status=SkillExperience.Status.PENDING
    ).count()
    if problems:
        logger.info("evolution of %s/%s: %s problem(s) with the evolver's answer", organization.pk, scope, len(problems))
    return {
        "experiences": len(pending),
        "budget": budget,
        **changes,
        "consumed": consumed,
        "superseded": superseded_count,
        "remaining": remaining,
        "problems": problems,
    }


EVOLVE_SKILLS = "evolve_skills"


def evolve_key(*, organization, scope: str) -> str:
    """Names one organisation and scope's evolution: the idempotency key of its waiting task and its lock."""
    return f"evolve:{organization.pk}:{scope}"


def evolve_enqueue(*, organization, scope: str) -> MemoryTask:
    """One waiting evolution per organisation and scope; while one runs, one follow-up waits."""
    key = evolve_key(organization=organization, scope=scope)
    run_after = timezone.now() + timedelta(seconds=settings.EVOLUTION_DEBOUNCE_SECONDS)
    task = enqueue(
        EVOLVE_SKILLS, {"scope": scope}, organization=organization, scope=scope, idempotency_key=key, run_after=run_after
    )
    if task.status == MemoryTask.Status.RUNNING:
        task = enqueue(
            EVOLVE_SKILLS, {"scope": scope}, organization=organization, scope=scope,
            idempotency_key=f"{key}:after:{task.pk}", run_after=run_after,
        )
    return task


def skills_evolve_locked(*, organization, scope: str, task=None) -> dict:
    with advisory_lock(evolve_key(organization=organization, scope=scope), wait=False):
        return skills_evolve(organization=organization, scope=scope, task=task)
