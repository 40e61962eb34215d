"""The LLM evolver: one chat completion proposes create, edit and merge operations within the
edit budget; each is validated (small edits only, no delete, known skills and experiences)."""

import difflib
import json

from django.conf import settings

from apps.providers.llm import LLMOutputError, chat_json
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
    # An example may quote a transcript: one longer than a trigger's bound is left out.
    short = [item for item in value if len(json.dumps(item, ensure_ascii=False)) <= EXAMPLE_MAX_CHARS]
    return short[:MAX_EXAMPLES]


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
    skills_by_name = {skill.name: skill for skill in skills}
    failures = failure_notes(skills)
    experiences_text = "\n".join(
        f"{label} [{experience.experience_type}, credibility {experience.credibility:.2f}] {experience.title}\n"
        f"   {experience.content[:1500]}"
        for label, experience in labels.items()
    )
    skills_text = (
        "\n".join(
            json.dumps(
                {
                    "name": s.name,
                    "description": s.description,
                    "instructions": s.instructions[:1500],
                    "triggers": s.triggers,
                    **({"worth_avoiding": failures[s.pk]} if s.pk in failures else {}),
                },
                ensure_ascii=False,
            )
            for s in skills
        )
        or "(none)"
    )
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
