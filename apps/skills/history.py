"""A skill's history for people: each version's changes against the one before, side by side, and
its lineage down to the transcript turns its experiences were learned from."""

import difflib
import json
from dataclasses import dataclass, field
from itertools import groupby

from django.db.models import Prefetch
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from apps.conversations.models import Message
from apps.skills.models import Skill, SkillExperience, SkillVersion
from apps.skills.services.skills import SNAPSHOT_FIELDS

DIFF_FIELDS = (*SNAPSHOT_FIELDS, "end_user")
# Unchanged lines kept around each change; longer unchanged runs fold into one marker row.
CONTEXT_LINES = 2


@dataclass
class DiffRow:
    kind: str  # equal | replace | delete | insert | fold
    left_number: int | None
    left: SafeString
    right_number: int | None
    right: SafeString


@dataclass
class FieldChange:
    name: str
    rows: list[DiffRow]


@dataclass
class Evidence:
    experience: SkillExperience
    quote: str
    signal_type: str
    transcript_url: str | None
    turns: list[tuple[int, str]] = field(default_factory=list)  # (seq, url to the turn)


@dataclass
class VersionEntry:
    version: SkillVersion
    changes: list[FieldChange]
    evidence: list[Evidence]


def field_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _intraline(old: str, new: str) -> tuple[SafeString, SafeString]:
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        removed, added = escape(old[i1:i2]), escape(new[j1:j2])
        if tag != "equal":
            removed, added = removed and f"<del>{removed}</del>", added and f"<ins>{added}</ins>"
        left.append(removed)
        right.append(added)
    return mark_safe("".join(left)), mark_safe("".join(right))


def _fold_row(skipped: int) -> DiffRow:
    return DiffRow("fold", None, mark_safe(f"… {skipped} unchanged line(s)"), None, mark_safe(""))


def _fold(rows: list[DiffRow]) -> list[DiffRow]:
    changed = [index for index, row in enumerate(rows) if row.kind != "equal"]
    keep = {index for c in changed for index in range(c - CONTEXT_LINES, c + CONTEXT_LINES + 1)}
    folded = []
    for kept, run in groupby(enumerate(rows), key=lambda item: item[0] in keep):
        run = [row for _, row in run]
        folded += run if kept else [_fold_row(len(run))]
    return folded


def side_by_side(old: str, new: str) -> list[DiffRow]:
    """Line-level side-by-side rows with character-level marks inside replaced lines."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [
                DiffRow("equal", i + 1, escape(old_lines[i]), j + 1, escape(new_lines[j]))
                for i, j in zip(range(i1, i2), range(j1, j2))
            ]
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for offset in range(pairs):
            left, right = _intraline(old_lines[i1 + offset], new_lines[j1 + offset])
            rows.append(DiffRow("replace", i1 + offset + 1, left, j1 + offset + 1, right))
        rows += [DiffRow("delete", i + 1, escape(old_lines[i]), None, mark_safe("")) for i in range(i1 + pairs, i2)]
        rows += [DiffRow("insert", None, mark_safe(""), j + 1, escape(new_lines[j])) for j in range(j1 + pairs, j2)]
    return _fold(rows)


def snapshot_changes(previous: dict, current: dict) -> list[FieldChange]:
    """The first version is compared with an empty snapshot."""
    changes = []
    for name in DIFF_FIELDS:
        old, new = previous.get(name), current.get(name)
        if old == new or (not previous and new in (None, "", [], {})):
            continue
        changes.append(FieldChange(name, side_by_side(field_text(old), field_text(new))))
    return changes


def _evidence(experience: SkillExperience, seq_by_message: dict) -> Evidence:
    transcript_url = (
        reverse("admin:conversations_session_transcript", args=[experience.session_id])
        if experience.session_id
        else None
    )
    seqs = sorted({seq_by_message[pk] for pk in experience.source_message_ids if pk in seq_by_message})
    evidence = experience.evidence if isinstance(experience.evidence, dict) else {}
    return Evidence(
        experience=experience,
        quote=str(evidence.get("quote", "")),
        signal_type=str(evidence.get("signal_type", "")),
        transcript_url=transcript_url,
        turns=[(seq, f"{transcript_url}#turn-{seq}") for seq in seqs] if transcript_url else [],
    )


def message_seqs(*, organization_id, message_ids) -> dict:
    """{message id: turn number}; pruned or erased turns are absent."""
    if not message_ids:
        return {}
    return dict(
        Message.objects.filter(organization_id=organization_id, pk__in=set(message_ids)).values_list("pk", "seq")
    )


def experience_evidence(experience: SkillExperience) -> Evidence:
    seqs = message_seqs(organization_id=experience.organization_id, message_ids=experience.source_message_ids)
    return _evidence(experience, seqs)


def skill_history(*, skill: Skill) -> list[VersionEntry]:
    """Every version, newest first, with its changes and the evidence behind it, in four queries."""
    versions = list(
        SkillVersion.objects.filter(skill=skill)
        .order_by("version")
        .prefetch_related(Prefetch("experiences", queryset=SkillExperience.objects.defer("embedding", "search_vector")))
    )
    message_ids = [
        pk for version in versions for experience in version.experiences.all() for pk in experience.source_message_ids
    ]
    seq_by_message = message_seqs(organization_id=skill.organization_id, message_ids=message_ids)
    previous_snapshots = [{}, *(version.snapshot for version in versions)]
    return [
        VersionEntry(
            version=version,
            changes=snapshot_changes(previous, version.snapshot),
            evidence=[_evidence(experience, seq_by_message) for experience in version.experiences.all()],
        )
        for version, previous in zip(versions, previous_snapshots)
    ][::-1]
