"""Operator-run consolidation of episodic and semantic memories: duplicates merge into a survivor,
contradictions are retired by the LLM or, offline, flagged; nothing is deleted, only soft-deleted with history.
"""

import itertools
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
from django.conf import settings
from django.db import transaction
from pydantic import BaseModel

from apps.memories.changes import cascade_edit, cascade_removal
from apps.memories.models import DETAILS_MAX_LENGTH, EpisodicMemory, SemanticMemory
from apps.memories.services.extract import EXTRACT_LOCKS
from apps.memories.services.memories import (
    EPISODIC,
    SEMANTIC,
    memories_held,
    memory_embed,
    memory_snapshot,
    memory_soft_delete,
    memory_update,
    merged_into_reason,
)
from apps.pipeline.locks import advisory_lock
from apps.pipeline.services import enqueue
from apps.providers.llm import LLMError, chat_json, llm_enabled, parse_items
from apps.providers.tokens import estimate_tokens, fit_text, room_for, token_batches

logger = logging.getLogger(__name__)

CONSOLIDATE_MEMORIES = "consolidate_memories"
ACTOR = "consolidation"
MODELS = {EPISODIC: EpisodicMemory, SEMANTIC: SemanticMemory}
# Pairs the model judges per call: small enough for any local model's context.
LLM_PAIRS_PER_CALL = 20

_WORD = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "stopped"})
_STOPWORDS = frozenset(
    "a an the and or but of to in on at for with by from as is are was were be been being has have had do does did "
    "this that these those it its he she they them his her their i me my we our you your who whom which what when "
    "where how also just very really so some any about into over after before than then there here".split()
)


@dataclass(frozen=True)
class Item:
    memory: object
    memory_type: str
    block: str
    stems: frozenset
    negated: bool
    numbers: frozenset
    names: frozenset
    normalized: str


@dataclass
class Report:
    dry_run: bool
    scope: str
    users: int = 0
    examined: int = 0
    merged: int = 0
    retired: int = 0
    flagged: int = 0
    llm_calls: int = 0
    merges: list = field(default_factory=list)
    retirements: list = field(default_factory=list)
    flags: list = field(default_factory=list)

    def as_dict(self, seconds: float) -> dict:
        counts = asdict(self)
        lists = {name: counts.pop(name) for name in ("merges", "retirements", "flags")}
        return {**counts, "seconds": round(seconds, 3), **lists}


def _stem(word: str) -> str:
    word = word.lower().removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _statement(memory, memory_type: str) -> str:
    return memory.summary if memory_type == EPISODIC else f"{memory.name}: {memory.summary}"


def _item(memory, memory_type: str) -> Item:
    words = _WORD.findall(memory.summary)
    lowered = [word.lower() for word in words]
    if memory_type == SEMANTIC:
        block = " ".join(_WORD.findall(memory.name.lower()))
    else:
        block = memory.occurred_at.date().isoformat()
    return Item(
        memory=memory,
        memory_type=memory_type,
        block=block,
        stems=frozenset(_stem(word) for word in lowered if word not in _STOPWORDS and not word.isdigit()),
        negated=any(word in _NEGATIONS or word.endswith("n't") for word in lowered),
        numbers=frozenset(word for word in lowered if word.isdigit()),
        # Capitalised words after the first: names, places, titles.
        names=frozenset(word.lower() for word in words[1:] if word[0].isupper()),
        normalized=" ".join(lowered),
    )


def _dice(left: frozenset, right: frozenset) -> float:
    if not left and not right:
        return 1.0
    return 2 * len(left & right) / (len(left) + len(right))


def _conflict(left: Item, right: Item) -> str:
    # A negation, a number or a name only one side has is a conflict, never a merge.
    if left.negated != right.negated:
        return "one of them is negated"
    if left.numbers and right.numbers and left.numbers != right.numbers:
        return "they state different numbers"
    if (left.names - right.names) and (right.names - left.names):
        return "they name different things"
    return ""


def _vectors(items: list[Item]) -> np.ndarray:
    matrix = np.zeros((len(items), settings.EMBEDDING_DIMENSIONS), dtype=np.float32)
    for row, item in enumerate(items):
        if item.memory.embedding is not None:
            matrix[row] = np.asarray(item.memory.embedding, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def _compare(items: list[Item], *, duplicates: list, conflicts: list) -> None:
    """Within one block (a subject, a day): pairs sharing most content words are conflicts when `_conflict` says so,
    else duplicates when their text is equal or their vectors close; (left, right[, why]) go to the lists."""
    if len(items) < 2:
        return
    cosine = _vectors(items) @ _vectors(items).T
    min_cosine = settings.CONSOLIDATE_MIN_COSINE
    min_text = settings.CONSOLIDATE_MIN_TEXT_SIMILARITY
    for (i, left), (j, right) in itertools.combinations(enumerate(items), 2):
        if _dice(left.stems, right.stems) < min_text:
            continue
        why = _conflict(left, right)
        if why:
            conflicts.append((left, right, why))
        elif left.normalized == right.normalized or cosine[i, j] >= min_cosine:
            duplicates.append((left, right))


class _DisjointSets:
    """Union-find over memory ids: each joined pair merges the two memories' groups."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, key):
        root = self.parent.setdefault(key, key)
        while root != self.parent[root]:
            root = self.parent[root]
        while key != root:  # path compression: every id on the way now points at the root
            next_key = self.parent[key]
            self.parent[key] = root
            key = next_key
        return root

    def join(self, left, right) -> None:
        self.parent[self.find(left)] = self.find(right)


def _groups(pairs: list[tuple[Item, Item]]) -> list[list[Item]]:
    """Connected duplicates, each group in a stable order."""
    sets = _DisjointSets()
    items = {}
    for left, right in pairs:
        items[left.memory.pk] = left
        items[right.memory.pk] = right
        sets.join(left.memory.pk, right.memory.pk)
    groups: dict = {}
    for pk, item in items.items():
        groups.setdefault(sets.find(pk), []).append(item)
    return sorted((sorted(group, key=_survivor_rank) for group in groups.values()), key=lambda g: str(g[0].memory.pk))


def _survivor_rank(item: Item):
    """The survivor: learned from the most turns, then the fullest text, then the oldest id."""
    memory = item.memory
    return (
        -len(memory.source_message_ids),
        -len(memory.summary) - len(memory.details),
        memory.created_at,
        str(memory.pk),
    )


class PairVerdict(BaseModel):
    pair: int
    verdict: Literal["duplicate", "contradiction", "compatible"]
    current: Literal["A", "B", ""] = ""


class PairsAnswer(BaseModel):
    """What the consolidation judge answers."""

    pairs: list[PairVerdict]


JUDGE_PROMPT = (
    "You compare numbered pairs of statements A and B from one person's memory, each with the date it "
    "was learned. For each pair decide: 'duplicate' (they say the same), 'contradiction' (both cannot be "
    "true now; say which one is current: 'A' or 'B', usually the later one unless the text says "
    "otherwise) or 'compatible' (current: ''). Answer with JSON: "
    '{"pairs": [{"pair": n, "verdict": "...", "current": "A"|"B"|""}]}.'
)


def _judge(conflicts: list, *, organization, task, report: Report, duplicates: list, retire: list) -> list:
    """Sorts the model's verdicts into `duplicates` and `retire` (current, superseded, why); returns the conflicts
    left to flag: those it found neither, or could not judge (a failed call)."""
    room = room_for(JUDGE_PROMPT)
    lines = [
        (
            (left, right, why),
            fit_text(
                f"A ({left.memory.updated_at:%Y-%m-%d}): {_statement(left.memory, left.memory_type)} | "
                f"B ({right.memory.updated_at:%Y-%m-%d}): {_statement(right.memory, right.memory_type)}",
                room // 4,
            ),
        )
        for left, right, why in conflicts
    ]
    flagged = []
    batches = token_batches(
        lines, cost=lambda line: estimate_tokens(line[1]) + 6, budget=room, max_items=LLM_PAIRS_PER_CALL
    )
    for batch_lines in batches:
        batch = [pair for pair, _ in batch_lines]
        numbered = "\n".join(f"[{number}] {text}" for number, (_, text) in enumerate(batch_lines, 1))
        try:
            report.llm_calls += 1
            answer = chat_json(
                messages=[{"role": "system", "content": JUDGE_PROMPT}, {"role": "user", "content": numbered}],
                answer=PairsAnswer,
                organization=organization,
                task=task,
                purpose="consolidate",
            )
        except LLMError as exc:
            logger.warning("consolidation: the model failed on %d pairs: %s", len(batch), type(exc).__name__)
            flagged += batch
            continue
        values = answer.get("pairs")
        answered = {
            entry.pair: entry
            for _, entry in parse_items(PairVerdict, values if isinstance(values, list) else [])[0]
            if 0 < entry.pair <= len(batch)
        }
        for number, (left, right, why) in enumerate(batch, 1):
            entry = answered.get(number)
            if entry is not None and entry.verdict == "duplicate":
                duplicates.append((left, right))
            elif entry is not None and entry.verdict == "contradiction" and entry.current in ("A", "B"):
                retire.append((left, right, why) if entry.current == "A" else (right, left, why))
            elif entry is None or entry.verdict != "compatible":
                flagged.append((left, right, why))
    return flagged


def _owner_plan(*, organization, scope: str, end_user_id, task, report: Report) -> tuple[list, list]:
    """The merge groups and the retirements (current, superseded, why) of one owner; flags go to the report."""
    merge_pairs = []
    retire = []
    for memory_type, model in MODELS.items():
        memories = model.objects.filter(
            organization=organization, scope=scope, end_user_id=end_user_id, deleted_at__isnull=True
        ).order_by("created_at", "id")
        items = [_item(memory, memory_type) for memory in memories]
        report.examined += len(items)
        blocks: dict = {}
        for item in items:
            blocks.setdefault(item.block, []).append(item)
        conflicts = []
        for block in blocks.values():
            _compare(block, duplicates=merge_pairs, conflicts=conflicts)
        if conflicts and llm_enabled():
            conflicts = _judge(
                conflicts, organization=organization, task=task, report=report, duplicates=merge_pairs, retire=retire
            )
        report.flags += [
            {"memory_type": memory_type, "ids": [str(left.memory.pk), str(right.memory.pk)], "reason": why}
            for left, right, why in conflicts
        ]
    groups = _groups(merge_pairs)
    # A retirement of a memory that is merged away applies to what it merges into.
    survivor_of = {item.memory.pk: group[0] for group in groups for item in group[1:]}
    retirements = {}
    for current, superseded, why in retire:
        current = survivor_of.get(current.memory.pk, current)
        superseded = survivor_of.get(superseded.memory.pk, superseded)
        if current.memory.pk != superseded.memory.pk:
            retirements.setdefault(superseded.memory.pk, (current, superseded, why))
    return groups, list(retirements.values())


@transaction.atomic
def _merge(group: list[Item], *, task_id) -> None:
    survivor = group[0].memory
    others = [item.memory for item in group[1:]]
    memory_type = group[0].memory_type
    # One client's erasure may be deleting one of them: its text must not move into the survivor after.
    memories_held(organization_id=survivor.organization_id, memories=[survivor, *others])
    details = survivor.details
    for other in others:
        if other.details and other.details not in details and other.details not in survivor.summary:
            details = f"{details}\n{other.details}".strip()
    details = details[:DETAILS_MAX_LENGTH]
    fields = {"details": details} if details != survivor.details else {}
    sources = [source for other in others for source in other.source_message_ids]
    embedding = memory_embed(memory_type, [{**memory_snapshot(survivor), **fields}])[0] if fields else None
    memory_update(
        memory=survivor,
        fields=fields,
        source_message_ids=sources,
        embedding=embedding,
        actor=ACTOR,
        reason=f"consolidation merged {', '.join(str(other.pk) for other in others)} into this memory",
        task_id=task_id,
    )
    for other in others:
        memory_soft_delete(memory=other, actor=ACTOR, reason=merged_into_reason(survivor.pk), task_id=task_id)
    cascade_edit(memory=survivor, memory_type=memory_type)


def memories_consolidate(
    *,
    organization,
    scope: str,
    end_user=None,
    dry_run: bool = False,
    task=None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Consolidates `end_user`'s memories in a scope, or every user's there, and returns the report.
    Each user is done under their extraction lock (erasure takes it too); a busy one raises and the pipeline retries."""
    started = time.monotonic()
    report = Report(dry_run=dry_run, scope=scope)
    if end_user is not None:
        owners = [end_user.pk]
    else:
        owners = sorted(
            {
                owner
                for model in MODELS.values()
                for owner in model.objects.filter(organization=organization, scope=scope, deleted_at__isnull=True)
                .values_list("end_user_id", flat=True)
                .distinct()
            },
            key=str,
        )
    task_id = getattr(task, "pk", None)
    for done, owner in enumerate(owners):
        with advisory_lock(EXTRACT_LOCKS.key(organization_id=organization.pk, end_user_id=owner), wait=False):
            groups, retirements = _owner_plan(
                organization=organization, scope=scope, end_user_id=owner, task=task, report=report
            )
            for group in groups:
                report.merges.append(
                    {
                        "memory_type": group[0].memory_type,
                        "survivor": str(group[0].memory.pk),
                        "merged": [str(item.memory.pk) for item in group[1:]],
                    }
                )
                report.merged += len(group) - 1
                if not dry_run:
                    _merge(group, task_id=task_id)
            for current, superseded, why in retirements:
                report.retirements.append(
                    {
                        "memory_type": superseded.memory_type,
                        "id": str(superseded.memory.pk),
                        "superseded_by": str(current.memory.pk),
                        "reason": why,
                    }
                )
                report.retired += 1
                if not dry_run:
                    reason = f"consolidation: superseded by {current.memory.pk} ({why})"
                    memory_soft_delete(memory=superseded.memory, actor=ACTOR, reason=reason, task_id=task_id)
        report.users += 1
        if progress:
            progress(done + 1, len(owners))
    report.flagged = len(report.flags)
    if not dry_run and (report.merged or report.retired):
        cascade_removal(organization=organization)
    return report.as_dict(time.monotonic() - started)


def consolidation_request(*, organization, scope: str, end_user=None, dry_run: bool, client=None):
    """Queues a consolidation (202 + task); a repeat while one is waiting or running joins it."""
    owner = str(end_user.pk) if end_user is not None else None
    return enqueue(
        CONSOLIDATE_MEMORIES,
        {"end_user": owner, "dry_run": dry_run},
        organization=organization,
        scope=scope,
        client=client,
        idempotency_key=f"{CONSOLIDATE_MEMORIES}:{organization.pk}:{scope}:{owner or '*'}:{int(dry_run)}",
    )


def consolidation_run(*, task, progress: Callable[[int, int], None] | None = None) -> dict:
    """Runs a queued consolidation: the handler's body, and the command's."""
    from apps.tenancy.models import EndUser

    end_user = None
    if task.payload.get("end_user"):
        end_user = EndUser.objects.filter(pk=task.payload["end_user"], organization_id=task.organization_id).first()
        if end_user is None:
            return {"skipped": "the user no longer exists"}
    return memories_consolidate(
        organization=task.organization,
        scope=task.scope,
        end_user=end_user,
        dry_run=bool(task.payload.get("dry_run")),
        task=task,
        progress=progress,
    )
