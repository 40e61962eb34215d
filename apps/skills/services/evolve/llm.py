"""The LLM evolver: one chat completion proposes create, edit and merge operations within the
edit budget; each is validated (small edits only, no delete, known skills and experiences)."""

import difflib
import json
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from apps.providers.llm import LLMOutputError, chat_json, validation_problems
from apps.providers.tokens import estimate_tokens, fit_text, room_for
from apps.skills.effectiveness import failure_notes
from apps.skills.models import Skill
from apps.skills.selectors import with_retrievals
from apps.skills.services.evolve.rules import MAX_EXAMPLES, MAX_TRIGGERS, TRIGGER_MAX_CHARS
from apps.skills.services.skills import skill_slug

TEXT_LIMITS = {"description": 1000, "instructions": 8000}
EXAMPLE_MAX_CHARS = 1000
SKILLS_IN_PROMPT = 30

EVOLVER_PROMPT = """You maintain a library of procedural skills for AI agents, learned from experiences.
Given new experiences (E1, E2, ...) and the existing skills, return a JSON object {"operations": [...]} with at most
BUDGET operations. Each operation is one of:
- {"op": "create", "name": slug, "description": str, "instructions": str, "triggers": [str], "examples": [object],
   "entry_type": "workflow"|"guide"|"script", "experiences": ["E1", ...]}
- {"op": "edit", "skill": existing skill name, "changes": {only the fields that change: description, instructions,
   triggers, examples, entry_type}, "experiences": [...]}  Prefer small edits; a large rewrite is refused.
- {"op": "merge", "skills": [two or more existing names], "into": {"name", "description", "instructions", "triggers",
   "examples", "entry_type"}, "experiences": [...]}
There is no delete. Leave out experiences that add nothing new. Never put personal data into a skill.
A skill's "worth_avoiding" note counts the failed sessions that followed it: a change to it should avoid what failed."""


class OperationError(ValueError):
    pass


EntryType = Literal[tuple(Skill.EntryType.values)]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class SkillAnswer(BaseModel):
    name: NonEmpty
    description: NonEmpty
    instructions: NonEmpty
    triggers: list[str] = []
    examples: list[dict] = []
    entry_type: EntryType = Skill.EntryType.GUIDE


class SkillChanges(BaseModel):
    """Only the fields that change; any other field is refused."""

    model_config = ConfigDict(extra="forbid")
    description: NonEmpty | None = None
    instructions: NonEmpty | None = None
    triggers: list[str] | None = None
    examples: list[dict] | None = None
    entry_type: EntryType | None = None


class CreateAnswer(SkillAnswer):
    op: Literal["create"]
    experiences: list[str]


class EditAnswer(BaseModel):
    op: Literal["edit"]
    skill: str
    changes: SkillChanges
    experiences: list[str]


class MergeAnswer(BaseModel):
    op: Literal["merge"]
    skills: list[str]
    into: SkillAnswer
    experiences: list[str]


OperationAnswer = Annotated[CreateAnswer | EditAnswer | MergeAnswer, Field(discriminator="op")]


class EvolveAnswer(BaseModel):
    """What the evolver answers."""

    operations: list[OperationAnswer]


def _triggers(values: list[str]) -> list[str]:
    return [item.strip()[:TRIGGER_MAX_CHARS] for item in values if item.strip()][:MAX_TRIGGERS]


def _examples(values: list[dict]) -> list[dict]:
    # An example may quote a transcript: one longer than a trigger's bound is left out.
    short = [item for item in values if len(json.dumps(item, ensure_ascii=False)) <= EXAMPLE_MAX_CHARS]
    return short[:MAX_EXAMPLES]


def _full_fields(skill: SkillAnswer) -> dict:
    return {
        "name": skill_slug(skill.name[: TEXT_LIMITS["description"]]),
        "description": skill.description[: TEXT_LIMITS["description"]],
        "instructions": skill.instructions[: TEXT_LIMITS["instructions"]],
        "triggers": _triggers(skill.triggers),
        "examples": _examples(skill.examples),
        "entry_type": skill.entry_type,
    }


def _is_small_edit(old: str, new: str) -> bool:
    if not old:
        return True
    return difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() >= settings.EVOLUTION_MIN_EDIT_SIMILARITY


def validate_operation(raw: dict, *, skills_by_name: dict, labels: dict) -> dict:
    """A checked operation {op, experiences, ...}; raises OperationError naming what is wrong."""
    op = raw.get("op")
    if op not in ("create", "edit", "merge"):
        raise OperationError(f"unknown operation {str(op)[:40]!r} (there is no delete)")
    try:
        answer = _OPERATION.validate_python(raw)
    except ValidationError as exc:
        raise OperationError(f"{op}: {validation_problems(exc)}") from None
    if not answer.experiences or any(ref not in labels for ref in answer.experiences):
        raise OperationError(f"{op}: experiences must name experiences of this batch")
    experiences = [labels[ref] for ref in dict.fromkeys(answer.experiences)]
    if isinstance(answer, CreateAnswer):
        return {"op": op, "fields": _full_fields(answer), "experiences": experiences}
    if isinstance(answer, EditAnswer):
        skill = skills_by_name.get(answer.skill)
        if skill is None:
            raise OperationError(f"edit: no live skill named {answer.skill[:100]!r}")
        changes = answer.changes.model_dump(exclude_none=True)
        if not changes:
            raise OperationError("edit: changes must be a non-empty object")
        for name in ("description", "instructions"):
            if name in changes:
                changes[name] = changes[name][: TEXT_LIMITS[name]]
                if not _is_small_edit(getattr(skill, name), changes[name]):
                    raise OperationError(f"edit of {skill.name}: the new {name} is a rewrite, not an edit")
        for name, clean in (("triggers", _triggers), ("examples", _examples)):
            if name in changes:
                changes[name] = clean(changes[name])
        return {"op": op, "skill": skill, "changes": changes, "experiences": experiences}
    if len(set(answer.skills)) < 2:
        raise OperationError("merge: skills must name two or more skills")
    sources = [skills_by_name.get(name) for name in dict.fromkeys(answer.skills)]
    if any(source is None for source in sources):
        raise OperationError("merge: every skill must be a live skill of this scope")
    return {"op": op, "sources": sources, "fields": _full_fields(answer.into), "experiences": experiences}


_OPERATION = TypeAdapter(OperationAnswer)


def llm_operations(
    *, organization, scope: str, pending: list, budget: int, task=None
) -> tuple[list[dict], list[str], bool]:
    """(valid operations within the budget, problems, whether the answer was usable)."""
    labels = {f"E{index}": experience for index, experience in enumerate(pending, start=1)}
    skills = list(
        with_retrievals(Skill.objects.filter(organization=organization, scope=scope, end_user__isnull=True))
        .exclude(status=Skill.Status.ARCHIVED)
        .order_by("-retrieval_count", "-updated_at")
        .defer("embedding")[:SKILLS_IN_PROMPT]
    )
    system = EVOLVER_PROMPT.replace("BUDGET", str(budget))
    room = room_for(system, "Existing skills:\n\n\nNew experiences:\n")
    # Every experience is shown (one left out would count as consumed); the skills fill what is left.
    share = max(20, room * 2 // 3 // max(1, len(labels)) - 1)
    failures = failure_notes(skills)
    experiences_text = "\n".join(
        fit_text(
            f"{label} [{experience.experience_type}, credibility {experience.credibility:.2f}] {experience.title}\n"
            f"   {experience.content[:1500]}",
            share,
        )
        for label, experience in labels.items()
    )
    left = room - estimate_tokens(experiences_text)
    share = left // max(1, len(skills))  # each skill's, its instructions trimmed to it
    skills_by_name, lines = {}, []
    for skill in skills:
        fields = {"name": skill.name, "description": skill.description[:300], "triggers": skill.triggers}
        if skill.pk in failures:
            fields["worth_avoiding"] = failures[skill.pk]
        base = estimate_tokens(json.dumps({**fields, "instructions": ""}, ensure_ascii=False)) + 1
        line = json.dumps(
            {**fields, "instructions": fit_text(skill.instructions[:1500], max(0, share - base))}, ensure_ascii=False
        )
        if estimate_tokens(line) + 1 > left:
            break
        left -= estimate_tokens(line) + 1
        skills_by_name[skill.name] = skill
        lines.append(line)
    skills_text = "\n".join(lines) or "(none)"
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Existing skills:\n{skills_text}\n\nNew experiences:\n{experiences_text}"},
    ]
    try:
        data = chat_json(messages=messages, answer=EvolveAnswer, organization=organization, task=task, purpose="evolve")
    except LLMOutputError as exc:
        return [], [str(exc)], False
    raw_operations = data.get("operations")
    if not isinstance(raw_operations, list):
        return [], ['The answer has no "operations" list.'], False
    operations, problems = [], []
    for index, raw in enumerate(raw_operations):
        try:
            if not isinstance(raw, dict):
                raise OperationError("an operation must be an object")
            operation = validate_operation(raw, skills_by_name=skills_by_name, labels=labels)
        except OperationError as exc:
            problems.append(f"operation {index}: {exc}")
            continue
        if len(operations) >= budget:
            problems.append(f"operation {index}: over the edit budget of {budget}")
            operation["deferred"] = True
        operations.append(operation)
    return operations, problems, True
