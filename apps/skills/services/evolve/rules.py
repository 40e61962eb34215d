"""The rule-based evolver: workflow lessons become workflow skills, lessons worth avoiding become
caveats of the skills that use the tool once enough end users corroborate them (apps.skills.trust)."""

import re
from dataclasses import dataclass, field

from django.conf import settings

from apps.skills.models import ExperienceType, Skill, SkillExperience
from apps.skills.selectors import with_retrievals
from apps.skills.services.rule_distiller import workflow_request, workflow_steps
from apps.skills.services.skills import skill_slug
from apps.skills.trust import may_reach, teachers

MAX_TRIGGERS = 20
MAX_EXAMPLES = 5
MAX_CAVEATS = 8
MAX_CAVEAT_TARGETS = 3
CAVEATS_HEADER = "Caveats:"
TRIGGER_MAX_CHARS = 300
DESCRIPTION_REQUEST_MAX_CHARS = 200
CAVEAT_MAX_CHARS = 400
_DIGITS = re.compile(r"\d+")
# Two workflows of at least this many common tools may differ in a few (EVOLUTION_WORKFLOW_OVERLAP).
WORKFLOW_MIN_SHARED_TOOLS = 3


@dataclass
class Draft:
    """One run's changes to one skill (new when skill is None), written as one version."""

    skill: Skill | None
    fields: dict
    experiences: list = field(default_factory=list)
    reasons: list = field(default_factory=list)

    def get(self, name):
        return self.fields[name] if name in self.fields else getattr(self.skill, name, None)


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
    """None when the caveat is already there (up to its numbers) or the list is full."""
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
    """The texts of an experience the rule evolver copies into a skill, cut as it cuts them: erasure scrubs them."""
    request = workflow_request(experience.content)
    return [
        experience.title,
        request[:DESCRIPTION_REQUEST_MAX_CHARS],
        request[:TRIGGER_MAX_CHARS],
        _caveat_text(experience),
    ]


def workflow_overlap(first, second) -> float:
    """How alike two tool sequences are as workflows: their tools' overlap (an extra lookup or a read in
    another order changes little); sequences of fewer shared tools than WORKFLOW_MIN_SHARED_TOOLS match only
    when their tools are the same."""
    first, second = set(first), set(second)
    if first == second:
        return 1.0
    shared = len(first & second)
    return shared / len(first | second) if shared >= WORKFLOW_MIN_SHARED_TOOLS else 0.0


def _common_order(first, second) -> int:
    """The length of the longest run of tools both call in the same order (not necessarily adjacent)."""
    previous = [0] * (len(second) + 1)
    for tool in first:
        current = [0]
        for index, other in enumerate(second):
            current.append(previous[index] + 1 if tool == other else max(previous[index + 1], current[index]))
        previous = current
    return previous[-1]


def _same_workflow(signature, candidates) -> tuple | None:
    """The (key, skill) of the candidate workflow most like `signature` (overlap, then the order they
    share), if one is alike enough."""
    best, best_score = None, (settings.EVOLUTION_WORKFLOW_OVERLAP, -1)
    for key, skill, other in candidates:
        score = (workflow_overlap(signature, other), _common_order(signature, other))
        if score[0] >= best_score[0] and score > best_score:
            best, best_score = (key, skill), score
    return best


def _caveat_groups(pending: list[SkillExperience]) -> list[list[SkillExperience]]:
    """Lessons worth avoiding by the caveat they would add: a group's users corroborate that caveat."""
    groups: dict[tuple, list] = {}
    for experience in pending:
        if experience.experience_type == ExperienceType.WORTH_AVOIDING and experience.action_signature:
            key = (experience.action_signature[0], _DIGITS.sub("#", _caveat_line(experience).lower()))
            groups.setdefault(key, []).append(experience)
    return list(groups.values())


def rule_drafts(*, organization, scope: str, pending: list[SkillExperience], budget: int) -> tuple[dict, set, set]:
    """(drafts keyed by skill id or new name, ids of experiences that added nothing, ids of those held)."""
    live = list(
        with_retrievals(Skill.objects.filter(organization=organization, scope=scope, end_user__isnull=True))
        .exclude(status=Skill.Status.ARCHIVED)
        .defer("embedding")
    )
    run = _RuleRun(live=live, budget=budget)
    for experience in pending:
        if experience.experience_type == ExperienceType.WORTH_LEARNING and experience.action_signature:
            run.add_workflow_lesson(experience)
    for group in _caveat_groups(pending):
        run.add_caveat_group(group)
    return run.drafts, run.superseded, run.held


class _RuleRun:
    def __init__(self, *, live: list[Skill], budget: int):
        self.live, self.budget = live, budget
        self.drafts: dict[str, Draft] = {}
        self.superseded: set = set()
        self.held: set = set()

    def draft_for(self, key: str, skill: Skill | None, fields: dict | None = None) -> Draft | None:
        if key not in self.drafts:
            if len(self.drafts) >= self.budget:
                return None
            self.drafts[key] = Draft(skill=skill, fields=fields or {})
        return self.drafts[key]

    def workflows(self):
        """(key, skill, signature) of the live workflows and this run's new ones."""
        for skill in self.live:
            if skill.entry_type == Skill.EntryType.WORKFLOW:
                yield str(skill.pk), skill, skill.action_signature
        for key, draft in self.drafts.items():
            if draft.skill is None and draft.get("entry_type") == Skill.EntryType.WORKFLOW:
                yield key, None, draft.get("action_signature")

    def add_workflow_lesson(self, experience: SkillExperience) -> None:
        """Votes count at the level of the workflow: a lesson joins the workflow it resembles most."""
        signature = list(experience.action_signature)
        request = workflow_request(experience.content)
        key, skill = _same_workflow(signature, self.workflows()) or ("new:" + "/".join(signature), None)
        fields = None if skill else _workflow_fields(signature, workflow_steps(experience.content), request)
        draft = self.draft_for(key, skill, fields)
        if draft is None:
            return  # over budget: stays pending
        request = request[:TRIGGER_MAX_CHARS]
        triggers = list(draft.get("triggers") or [])
        # The same procedure seen again supports the skill (its teacher a supporter, a vote); its request
        # (one user's words) is copied only when new and where no other user would be served it.
        audience = None if skill is not None else teachers(draft.experiences)
        if not request or request in triggers or not may_reach(experiences=[experience], audience_ids=audience):
            draft.experiences.append(experience)
            draft.reasons.append(f"workflow seen again (support): {experience.title}")
            return
        if len(triggers) < MAX_TRIGGERS:
            draft.fields["triggers"] = [*triggers, request]
        examples = list(draft.get("examples") or [])
        if len(examples) < MAX_EXAMPLES:
            session_id = experience.session.session_id if experience.session_id else None
            draft.fields["examples"] = [
                *examples,
                {"request": request, "steps": list(signature), "session_id": session_id},
            ]
        draft.experiences.append(experience)
        draft.reasons.append(
            f"workflow seen again: {experience.title}" if skill else f"new workflow: {experience.title}"
        )

    def caveat_targets(self, tool: str) -> list[tuple[str, Skill | None]]:
        """The live workflows calling `tool` (most retrieved first), this run's new ones; else its guide."""
        targets = [
            (str(skill.pk), skill)
            for skill in self.live
            if skill.entry_type == Skill.EntryType.WORKFLOW and tool in skill.action_signature
        ]
        targets.sort(key=lambda item: -item[1].retrieval_count)
        targets += [
            (key, None)
            for key, draft in self.drafts.items()
            if draft.skill is None and tool in (draft.get("action_signature") or [])
        ]
        if targets:
            return targets
        guide = next(
            (
                skill
                for skill in self.live
                if skill.entry_type == Skill.EntryType.GUIDE and skill.action_signature == [tool]
            ),
            None,
        )
        return [(str(guide.pk) if guide else f"new:guide:{tool}", guide)]

    def add_caveat_group(self, group: list[SkillExperience]) -> None:
        """The caveat joins skills whose audience the lessons may reach; else they are held or superseded."""
        tool = group[0].action_signature[0]
        targets = self.caveat_targets(tool)[:MAX_CAVEAT_TARGETS]
        used = untrusted = False
        for key, skill in targets:
            # An existing skill may be served to anyone later; a skill this run creates, to its teachers.
            audience = (
                None if skill is not None else teachers(self.drafts[key].experiences if key in self.drafts else ())
            )
            if not may_reach(experiences=group, audience_ids=audience):
                untrusted = True
                continue
            fields = _guide_fields(tool) if skill is None and key not in self.drafts else None
            draft = self.draft_for(key, skill, fields)
            if draft is None:
                continue
            instructions = _add_caveat(draft.get("instructions") or "", _caveat_line(group[0]))
            if instructions is None:
                continue
            draft.fields["instructions"] = instructions
            draft.experiences.extend(group)
            draft.reasons.append(f"caveat: {group[0].title}")
            used = True
        ids = {experience.pk for experience in group}
        if used:
            return
        if untrusted:
            self.held |= ids
        elif all(key in self.drafts or len(self.drafts) < self.budget for key, _ in targets):
            self.superseded |= ids


def _guide_fields(tool: str) -> dict:
    return {
        "name": skill_slug(f"{tool}-pitfalls"),
        "description": f"Known pitfalls of calling {_humanise(tool)} and how to avoid them.",
        "instructions": f"Before calling {tool}, check its arguments against earlier tool results.",
        "entry_type": Skill.EntryType.GUIDE,
        "triggers": [f"{_humanise(tool)} error"],
        "examples": [],
        "action_signature": [tool],
    }
