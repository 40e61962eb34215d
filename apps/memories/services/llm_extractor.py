"""The LLM extractor: new turns (with their dates) and the user's most similar memories go in;
add / update / delete / none operations come back and are validated before anything is applied.

Validation is strict and never raises on a strange answer: an operation that is unknown, names
an id that was not among the candidates shown (another user's, a made-up one, a deleted one),
cites none of the new turns or lacks required fields is rejected and reported, never applied.
"""

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from datetime import timezone as dt_timezone

from django.conf import settings

from apps.core.temporal import ResolvedDate, resolve_dates
from apps.memories.models import (
    ACTOR_MAX_LENGTH,
    DETAILS_MAX_LENGTH,
    EVENT_TYPE_MAX_LENGTH,
    NAME_MAX_LENGTH,
    SUMMARY_MAX_LENGTH,
    TimeGranularity,
)
from apps.memories.services.memories import EPISODIC, SEMANTIC, memory_type_of
from apps.providers.llm import LLMOutputError, chat_json
from apps.tenancy.readers import Reader

OPERATIONS = ("add", "update", "delete", "none")
KEY_PREFIX = {EPISODIC: "E", SEMANTIC: "S"}
SEARCH_QUERY_MAX_CHARS = 1000
REJECTED_MAX = 50

SYSTEM_PROMPT = """You maintain the long-term memory an assistant keeps about one person (the user) and the people, things and events in their life.
You receive new conversation turns, each with its date, and the existing memories most similar to them.
Decide which operations to apply to two kinds of memory:
- episodic: dated events (who did what, when)
- semantic: lasting facts (about a person, a thing, a preference, a relationship)
Operations:
- "add": a memory the turns state that no existing memory covers
- "update": an existing memory the turns refine, correct or extend; give its id and only the fields that change
- "delete": an existing memory the turns contradict or retract; give its id and a reason
- "none": an existing memory the turns merely repeat; give its id
Return one JSON object {"episodic": [...], "semantic": [...]}; {"episodic": [], "semantic": []} when nothing is worth remembering.
Episodic item: {"operation", "id" (not for add), "occurred_at": an absolute date "YYYY-MM-DD" (or "YYYY-MM", "YYYY", an ISO datetime),
 "time_granularity": "day" | "week" | "month" | "year" | "exact", "actor": who did it, "event_type": a short label,
 "summary": one self-contained sentence with names instead of pronouns, "details", "turns": [the turn numbers it comes from], "reason"}
Semantic item: {"operation", "id" (not for add), "name": the subject, "summary": one self-contained sentence, "details",
 "turns": [the turn numbers it comes from], "reason"}
Never write relative dates: resolve them against the date of the turn that says them; where a turn shows a resolved date in <<...>>, use it.
Use only ids of the existing memories listed. State only what the turns say; do not invent."""


@dataclass
class ExtractionTurn:
    message: object
    dates: list[ResolvedDate]


@dataclass
class Candidates:
    """The existing memories shown to the model, under short keys ("E1", "S2") it can copy reliably."""

    by_key: dict = field(default_factory=dict)

    def add(self, memory) -> None:
        if any(shown.pk == memory.pk for shown in self.by_key.values()):
            return
        memory_type = memory_type_of(memory)
        count = sum(1 for shown in self.by_key.values() if memory_type_of(shown) == memory_type)
        self.by_key[f"{KEY_PREFIX[memory_type]}{count + 1}"] = memory

    def of_type(self, memory_type: str) -> list[tuple[str, object]]:
        return [(key, memory) for key, memory in self.by_key.items() if memory_type_of(memory) == memory_type]

    def lookup(self, memory_type: str, identifier) -> object | None:
        """The shown memory of this type named by its key or its full id; None for anything else."""
        identifier = str(identifier).strip()
        memory = self.by_key.get(identifier.upper())
        if memory is None:
            memory = next((shown for shown in self.by_key.values() if str(shown.pk) == identifier.lower()), None)
        return memory if memory is not None and memory_type_of(memory) == memory_type else None


@dataclass
class Operation:
    memory_type: str
    operation: str
    target: object | None = None
    fields: dict = field(default_factory=dict)
    source_message_ids: list = field(default_factory=list)
    reason: str = ""


@dataclass
class Plan:
    operations: list[Operation] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# Candidates --------------------------------------------------------------------------------


def find_candidates(*, session, turns: list[ExtractionTurn]) -> Candidates:
    """The user's live memories in the session's scope most similar to each new turn, through the
    shared search engine (so scoping is the engine's, not a second copy of it)."""
    from apps.memories.search import EPISODIC_SOURCE, SEMANTIC_SOURCE
    from apps.search.engine import rrf_scores, search_source

    # A reader of exactly the session's scope: memories are written there, so only they may be changed.
    reader = Reader(organization_id=session.organization_id, read_scopes=(session.scope,))
    filters = {"user_id": session.end_user.user_id}
    candidates = Candidates()
    per_turn = settings.EXTRACTION_CANDIDATES_PER_TURN
    for source in (EPISODIC_SOURCE, SEMANTIC_SOURCE):
        rankings = [
            [
                memory
                for memory, _ in search_source(
                    source, reader=reader, query=query, method="hybrid", limit=per_turn, filters=filters
                )
            ]
            for query in ((turn.message.content or "")[:SEARCH_QUERY_MAX_CHARS] for turn in turns)
            if query.strip()
        ]
        # A memory close to several turns comes first.
        fused = rrf_scores(rankings, key=lambda memory: memory.pk)
        best = sorted(fused.items(), key=lambda pair: (-pair[1][1], str(pair[0])))
        for _, (memory, _) in best[: settings.EXTRACTION_MAX_CANDIDATES]:
            candidates.add(memory)
    return candidates


# Prompt ------------------------------------------------------------------------------------


def _turn_line(turn: ExtractionTurn, max_chars: int) -> str:
    message = turn.message
    text = message.content if len(message.content) <= max_chars else message.content[:max_chars] + " [...]"
    speaker = f"{message.name} ({message.role})" if message.name else message.role
    line = f"[{message.seq}] {message.occurred_at:%Y-%m-%d %H:%M} {speaker}: {text}"
    if turn.dates:
        line += " <<" + "; ".join(f"{resolved.expression} = {resolved.describe()}" for resolved in turn.dates) + ">>"
    return line


def _memory_line(key: str, memory) -> str:
    if memory_type_of(memory) == EPISODIC:
        who = " - ".join(part for part in (memory.actor, memory.event_type) if part)
        head = f"[{key}] {memory.occurred_at:%Y-%m-%d} ({memory.time_granularity}) {who}: {memory.summary}"
    else:
        head = f"[{key}] {memory.name}: {memory.summary}"
    return f"{head} | {memory.details}" if memory.details else head


def render_prompt(*, session, turns: list[ExtractionTurn], candidates: Candidates) -> list[dict]:
    max_chars = settings.DISTILLER_MAX_MESSAGE_CHARS
    sections = [
        f"Conversation session {session.session_id}.",
        "New turns ([turn number] date time speaker: text <<resolved relative dates>>):\n"
        + "\n".join(_turn_line(turn, max_chars) for turn in turns),
    ]
    for memory_type in (EPISODIC, SEMANTIC):
        shown = candidates.of_type(memory_type)
        lines = "\n".join(_memory_line(key, memory) for key, memory in shown) or "(none)"
        sections.append(f"Existing {memory_type} memories:\n{lines}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(sections)}]


# Validation --------------------------------------------------------------------------------


class Rejected(Exception):
    pass


def _text(item: dict, name: str, max_length: int, *, required: bool = False) -> str | None:
    """A trimmed string field, cut to its column's size; None when absent."""
    value = item.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise Rejected(f"missing {name}")
        return None
    if not isinstance(value, str):
        raise Rejected(f"{name} is not a string")
    return value.strip()[:max_length]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=dt_timezone.utc)


def parse_occurred_at(value, *, reference: datetime) -> tuple[datetime, str] | None:
    """An absolute time and its granularity from an ISO date or datetime, "YYYY-MM", "YYYY", or a
    relative expression resolved against the reference (the date of the turn that said it)."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return _midnight(date.fromisoformat(value)), TimeGranularity.DAY
        except ValueError:
            return None
    if match := re.fullmatch(r"(\d{4})-(\d{2})", value):
        if 1 <= int(match.group(2)) <= 12:
            return _midnight(date(int(match.group(1)), int(match.group(2)), 1)), TimeGranularity.MONTH
        return None
    if re.fullmatch(r"\d{4}", value):
        return _midnight(date(int(value), 1, 1)), TimeGranularity.YEAR
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        resolved = resolve_dates(value, reference)
        return (_midnight(resolved[0].start), resolved[0].granularity) if resolved else None
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt_timezone.utc)), TimeGranularity.EXACT


def _cited(item: dict, by_seq: dict) -> list[ExtractionTurn]:
    seqs = item.get("turns", item.get("source_turns")) or []
    if not isinstance(seqs, list):
        seqs = [seqs]
    cited = []
    for seq in seqs:
        try:
            turn = by_seq.get(int(seq))
        except (TypeError, ValueError):
            turn = None
        if turn is not None and turn not in cited:
            cited.append(turn)
    return cited


def _episodic_time(item: dict, cited: list[ExtractionTurn], problems: list[str], *, required: bool) -> dict:
    """occurred_at as the model gave it, else the first date resolved in the cited turns, else the
    first cited turn's own date (an event is remembered on the day it was told, at the least)."""
    reference = cited[0].message.occurred_at
    parsed = parse_occurred_at(item.get("occurred_at"), reference=reference)
    if parsed is None and item.get("occurred_at") not in (None, ""):
        problems.append(f"unusable occurred_at {str(item.get('occurred_at'))[:40]!r}; dated from the turns instead")
    if parsed is None:
        if not required:
            return {}
        resolved = next((resolved for turn in cited for resolved in turn.dates), None)
        parsed = (
            (_midnight(resolved.start), resolved.granularity)
            if resolved
            else (_midnight(reference.date()), TimeGranularity.DAY)
        )
    occurred_at, granularity = parsed
    given = item.get("time_granularity")
    if isinstance(given, str) and given in TimeGranularity.values:
        granularity = given
    return {"occurred_at": occurred_at, "time_granularity": granularity}


def _fields(memory_type: str, item: dict, cited: list[ExtractionTurn], problems: list[str], *, adding: bool) -> dict:
    if memory_type == EPISODIC:
        fields = {
            "summary": _text(item, "summary", SUMMARY_MAX_LENGTH, required=adding),
            "details": _text(item, "details", DETAILS_MAX_LENGTH),
            "actor": _text(item, "actor", ACTOR_MAX_LENGTH),
            "event_type": _text(item, "event_type", EVENT_TYPE_MAX_LENGTH),
        }
        if cited:
            fields.update(_episodic_time(item, cited, problems, required=adding))
    else:
        fields = {
            "name": _text(item, "name", NAME_MAX_LENGTH, required=adding),
            "summary": _text(item, "summary", SUMMARY_MAX_LENGTH, required=adding),
            "details": _text(item, "details", DETAILS_MAX_LENGTH),
            "source": _text(item, "source", 255),
        }
    return {name: value for name, value in fields.items() if value is not None}


def _operation(
    memory_type: str, item, *, by_seq: dict, candidates: Candidates, claimed: set, problems: list
) -> Operation:
    if not isinstance(item, dict):
        raise Rejected("not an object")
    operation = str(item.get("operation", item.get("event", ""))).strip().lower()
    if operation not in OPERATIONS:
        raise Rejected(f"unknown operation {operation[:40]!r}")
    reason = _text(item, "reason", 1000) or ""
    target = None
    if operation != "add" or item.get("id") not in (None, ""):
        if operation == "add":
            raise Rejected("an add must not name an id")
        target = candidates.lookup(memory_type, item.get("id"))
        if target is None:
            raise Rejected(f"id {str(item.get('id'))[:64]!r} is not among the {memory_type} candidates shown")
        if target.pk in claimed:
            raise Rejected(f"memory {item.get('id')!r} is already changed by an earlier operation of this answer")
    cited = _cited(item, by_seq)
    if operation in ("add", "update") and not cited:
        raise Rejected("cites none of the new turns")
    fields = (
        _fields(memory_type, item, cited, problems, adding=operation == "add") if operation in ("add", "update") else {}
    )
    if operation == "update":
        fields = {name: value for name, value in fields.items() if getattr(target, name) != value}
        if not fields:
            operation = "none"
    if target is not None and operation != "none":
        claimed.add(target.pk)
    return Operation(
        memory_type=memory_type,
        operation=operation,
        target=target,
        fields=fields,
        source_message_ids=[turn.message.pk for turn in cited],
        reason=reason,
    )


def parse_operations(data, *, turns: list[ExtractionTurn], candidates: Candidates) -> Plan:
    """Validates the model's answer into operations that are safe to apply, and what was rejected."""
    plan = Plan()
    if not isinstance(data, dict):
        plan.problems.append("the answer is not a JSON object")
        return plan
    unknown = sorted(set(data) - {EPISODIC, SEMANTIC})
    if unknown:
        plan.problems.append(f"ignored unknown keys {', '.join(map(str, unknown))[:200]}")
    by_seq = {turn.message.seq: turn for turn in turns}
    claimed: set = set()
    for memory_type in (EPISODIC, SEMANTIC):
        items = data.get(memory_type) or []
        if not isinstance(items, list):
            plan.problems.append(f"{memory_type} is not a list")
            continue
        for index, item in enumerate(items):
            try:
                plan.operations.append(
                    _operation(
                        memory_type, item, by_seq=by_seq, candidates=candidates, claimed=claimed, problems=plan.problems
                    )
                )
            except Rejected as exc:
                entry = {"memory_type": memory_type, "index": index, "reason": str(exc)}
                if isinstance(item, dict):
                    entry["operation"] = str(item.get("operation", item.get("event", "")))[:40]
                    if item.get("id") not in (None, ""):
                        entry["id"] = str(item.get("id"))[:64]
                plan.rejected.append(entry)
    plan.rejected = plan.rejected[:REJECTED_MAX]
    return plan


def llm_plan(*, session, turns: list[ExtractionTurn], task=None) -> Plan:
    """Asks the model. An unreachable endpoint raises LLMError (the task retries); an answer that is
    not JSON is an empty plan with the problem noted."""
    candidates = find_candidates(session=session, turns=turns)
    prompt = render_prompt(session=session, turns=turns, candidates=candidates)
    try:
        data = chat_json(messages=prompt, organization=session.organization, task=task, purpose="extract_memories")
    except LLMOutputError as exc:
        return Plan(problems=[str(exc)])
    return parse_operations(data, turns=turns, candidates=candidates)
