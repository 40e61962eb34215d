"""The LLM extractor: new turns and the user's most similar memories go in; add / update / delete / none
operations come back, and any that name an unshown id, cite no new turn or lack fields are rejected, never applied.
"""

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from datetime import timezone as dt_timezone
from itertools import zip_longest
from typing import Annotated, Literal

from django.conf import settings
from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, ValidationError

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
from apps.providers.llm import LLMOutputError, chat_json, validation_problems
from apps.providers.tokens import estimate_tokens, fit_text, room_for, token_batches
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
        if memory not in self.by_key.values():
            memory_type = memory_type_of(memory)
            self.by_key[f"{KEY_PREFIX[memory_type]}{len(self.of_type(memory_type)) + 1}"] = memory

    def of_type(self, memory_type: str) -> list[tuple[str, object]]:
        return [(key, memory) for key, memory in self.by_key.items() if memory_type_of(memory) == memory_type]

    def lookup(self, memory_type: str, identifier) -> object | None:
        """The shown memory of this type named by its key or its full id; None for anything else."""
        identifier = str(identifier).strip()
        memory = self.by_key.get(identifier.upper()) or next(
            (shown for shown in self.by_key.values() if str(shown.pk) == identifier.lower()), None
        )
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


def find_candidates(*, session, turns: list[ExtractionTurn]) -> Candidates:
    """The user's live memories most similar to each new turn, through the shared search engine (and its scoping)."""
    from apps.memories.search import EPISODIC_SOURCE, SEMANTIC_SOURCE
    from apps.search.engine import rrf_scores, search_source

    # A reader of exactly the session's scope: memories are written there, so only they may be changed.
    reader = Reader(organization_id=session.organization_id, read_scopes=(session.scope,))
    filters = {"user_id": session.end_user.user_id}
    options = {"method": "hybrid", "limit": settings.EXTRACTION_CANDIDATES_PER_TURN, "filters": filters}
    queries = [(turn.message.content or "")[:SEARCH_QUERY_MAX_CHARS] for turn in turns]
    candidates = Candidates()
    for source in (EPISODIC_SOURCE, SEMANTIC_SOURCE):
        rankings = [
            [memory for memory, _ in search_source(source, reader=reader, query=query, **options)]
            for query in queries
            if query.strip()
        ]
        # A memory close to several turns comes first.
        fused = rrf_scores(rankings, key=lambda memory: memory.pk)
        best = sorted(fused.items(), key=lambda pair: (-pair[1][1], str(pair[0])))
        for _, (memory, _) in best[: settings.EXTRACTION_MAX_CANDIDATES]:
            candidates.add(memory)
    return candidates


def _turn_line(turn: ExtractionTurn, max_tokens: int) -> str:
    message = turn.message
    max_chars = settings.DISTILLER_MAX_MESSAGE_CHARS
    text = message.content if len(message.content) <= max_chars else message.content[:max_chars] + " [...]"
    speaker = f"{message.name} ({message.role})" if message.name else message.role
    line = f"[{message.seq}] {message.occurred_at:%Y-%m-%d %H:%M} {speaker}: {text}"
    if turn.dates:
        line += " <<" + "; ".join(f"{resolved.expression} = {resolved.describe()}" for resolved in turn.dates) + ">>"
    return fit_text(line, max_tokens)


def _memory_line(key: str, memory) -> str:
    if memory_type_of(memory) == EPISODIC:
        who = " - ".join(part for part in (memory.actor, memory.event_type) if part)
        head = f"[{key}] {memory.occurred_at:%Y-%m-%d} ({memory.time_granularity}) {who}: {memory.summary}"
    else:
        head = f"[{key}] {memory.name}: {memory.summary}"
    return f"{head} | {memory.details}" if memory.details else head


_HEADINGS = (
    "Conversation session .\n\nNew turns ([turn number] date time speaker: text <<resolved relative dates>>):\n"
    "\n\nExisting episodic memories:\n\n\nExisting semantic memories:\n"
)


def _turns_room() -> int:
    """The new turns take at most half of the prompt's room; the memories shown fill the rest."""
    return room_for(SYSTEM_PROMPT, _HEADINGS) // 2


def extraction_batches(messages: list, turns: dict) -> list[list]:
    """Batches of at most EXTRACTION_MAX_TURNS messages whose turns (message id → ExtractionTurn) fit their share."""
    room = _turns_room()
    return token_batches(
        messages,
        cost=lambda message: estimate_tokens(_turn_line(turns[message.pk], room)) + 1 if message.pk in turns else 0,
        budget=room,
        max_items=settings.EXTRACTION_MAX_TURNS,
    )


def render_prompt(*, session, turns: list[ExtractionTurn], candidates: Candidates) -> list[dict]:
    room = _turns_room()
    head = [
        f"Conversation session {session.session_id}.",
        "New turns ([turn number] date time speaker: text <<resolved relative dates>>):\n"
        + "\n".join(_turn_line(turn, room) for turn in turns),
    ]
    # Shown: those that fit, alternating types, most similar first; the rest leave `candidates`, so none is named.
    left = room_for(SYSTEM_PROMPT, _HEADINGS, session.session_id, head[1])
    shown: dict[str, dict[str, str]] = {EPISODIC: {}, SEMANTIC: {}}
    for ranked in zip_longest(*(candidates.of_type(memory_type) for memory_type in shown)):
        for lines, pair in zip(shown.values(), ranked):
            line = pair and _memory_line(*pair)
            if line and estimate_tokens(line) + 1 <= left:
                left -= estimate_tokens(line) + 1
                lines[pair[0]] = line
    candidates.by_key = {
        key: memory for key, memory in candidates.by_key.items() if any(key in s for s in shown.values())
    }
    sections = head + [
        f"Existing {memory_type} memories:\n" + ("\n".join(lines.values()) or "(none)")
        for memory_type, lines in shown.items()
    ]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(sections)}]


class Rejected(Exception):
    pass


def _turn_list(value):
    return value if isinstance(value, list) or value is None else [value]


def _identifier(value):
    return None if value in (None, "") else str(value)


class MemoryOperationAnswer(BaseModel):
    operation: Literal[OPERATIONS]
    id: Annotated[str | None, BeforeValidator(_identifier)] = None
    turns: Annotated[list[int], BeforeValidator(_turn_list)] = Field(
        default=[], validation_alias=AliasChoices("turns", "source_turns")
    )
    summary: str | None = None
    details: str | None = None
    reason: str | None = None


class EpisodicAnswer(MemoryOperationAnswer):
    occurred_at: str | None = None
    # Named in the schema; a value outside it is ignored (the date's own granularity is kept).
    time_granularity: str | None = Field(default=None, json_schema_extra={"enum": [*TimeGranularity.values, None]})
    actor: str | None = None
    event_type: str | None = None


class SemanticAnswer(MemoryOperationAnswer):
    name: str | None = None
    source: str | None = None


class ExtractionAnswer(BaseModel):
    """What the extractor answers."""

    episodic: list[EpisodicAnswer] = []
    semantic: list[SemanticAnswer] = []


ANSWERS = {EPISODIC: EpisodicAnswer, SEMANTIC: SemanticAnswer}


def _text(item: MemoryOperationAnswer, name: str, max_length: int, *, required: bool = False) -> str | None:
    value = (getattr(item, name) or "").strip()
    if not value:
        if required:
            raise Rejected(f"missing {name}")
        return None
    return value[:max_length]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=dt_timezone.utc)


def parse_occurred_at(value, *, reference: datetime) -> tuple[datetime, str] | None:
    """(time, granularity) from an ISO date or datetime, "YYYY-MM", "YYYY", or a relative expression."""
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


def _episodic_time(item: EpisodicAnswer, cited: list[ExtractionTurn], problems: list[str], *, required: bool) -> dict:
    """occurred_at as given, else the first date resolved in the cited turns, else the first cited turn's date."""
    reference = cited[0].message.occurred_at
    parsed = parse_occurred_at(item.occurred_at, reference=reference)
    if parsed is None and item.occurred_at:
        problems.append(f"unusable occurred_at {item.occurred_at[:40]!r}; dated from the turns instead")
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
    if item.time_granularity in TimeGranularity.values:
        granularity = item.time_granularity
    return {"occurred_at": occurred_at, "time_granularity": granularity}


# The text fields of each type: (name, max length, required in an add).
TEXT_FIELDS = {
    EPISODIC: (
        ("summary", SUMMARY_MAX_LENGTH, True),
        ("details", DETAILS_MAX_LENGTH, False),
        ("actor", ACTOR_MAX_LENGTH, False),
        ("event_type", EVENT_TYPE_MAX_LENGTH, False),
    ),
    SEMANTIC: (
        ("name", NAME_MAX_LENGTH, True),
        ("summary", SUMMARY_MAX_LENGTH, True),
        ("details", DETAILS_MAX_LENGTH, False),
        ("source", 255, False),
    ),
}


def _fields(
    memory_type: str, item: MemoryOperationAnswer, cited: list[ExtractionTurn], problems: list[str], *, adding: bool
) -> dict:
    fields = {
        name: _text(item, name, length, required=adding and needed) for name, length, needed in TEXT_FIELDS[memory_type]
    }
    if memory_type == EPISODIC and cited:
        fields.update(_episodic_time(item, cited, problems, required=adding))
    return {name: value for name, value in fields.items() if value is not None}


def _operation(
    memory_type: str, item: dict, *, by_seq: dict, candidates: Candidates, claimed: set, problems: list
) -> Operation:
    operation = str(item.get("operation", item.get("event", ""))).strip().lower()
    if operation not in OPERATIONS:
        raise Rejected(f"unknown operation {operation[:40]!r}")
    try:
        answer = ANSWERS[memory_type].model_validate({**item, "operation": operation})
    except ValidationError as exc:
        raise Rejected(validation_problems(exc)) from None
    reason = _text(answer, "reason", 1000) or ""
    target = None
    if operation != "add" or answer.id:
        if operation == "add":
            raise Rejected("an add must not name an id")
        target = candidates.lookup(memory_type, answer.id)
        if target is None:
            raise Rejected(f"id {str(answer.id)[:64]!r} is not among the {memory_type} candidates shown")
        if target.pk in claimed:
            raise Rejected(f"memory {answer.id!r} is already changed by an earlier operation of this answer")
    cited, fields = [by_seq[seq] for seq in dict.fromkeys(answer.turns) if seq in by_seq], {}
    if operation in ("add", "update"):
        if not cited:
            raise Rejected("cites none of the new turns")
        fields = _fields(memory_type, answer, cited, problems, adding=operation == "add")
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
    plan = Plan()
    if not isinstance(data, dict):
        plan.problems.append("the answer is not a JSON object")
        return plan
    if unknown := sorted(set(data) - {EPISODIC, SEMANTIC}):
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
                if not isinstance(item, dict):
                    raise Rejected("not an object")
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
    """An unreachable endpoint raises LLMError (the task retries); an answer that is not JSON is an empty plan."""
    candidates = find_candidates(session=session, turns=turns)
    prompt = render_prompt(session=session, turns=turns, candidates=candidates)
    try:
        data = chat_json(
            messages=prompt,
            answer=ExtractionAnswer,
            organization=session.organization,
            task=task,
            purpose="extract_memories",
        )
    except LLMOutputError as exc:
        return Plan(problems=[str(exc)])
    return parse_operations(data, turns=turns, candidates=candidates)
