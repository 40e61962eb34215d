"""Prompt-ready context for one user within a token budget, every line referencing an item: one search ranks
the candidates, the block is filled in that order while it fits, and the budget is never exceeded.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from apps.providers.tokens import estimate_tokens, fit_text
from apps.search.engine import search
from apps.search.registry import SOURCES
from apps.skills.services.retrieve import skills_rank
from apps.tenancy.readers import Reader

CONTEXT_TYPES = ("profile", "semantic", "episodic", "message", "procedural")
# Sections in the order the block shows them.
SECTIONS = {
    "user": "About the user",
    "people": "People",
    "facts": "Facts",
    "events": "Events",
    "turns": "Earlier conversation",
    "skills": "Skills for this task",
}
SECTION_OF_TYPE = dict(zip(CONTEXT_TYPES, ("people", "facts", "events", "turns", "skills"), strict=True))
# Shares of the budget one item may take at most: the user's page, another person's page, a skill, anything else.
# The user's page is a header: at a quarter it cost LOCOMO questions evidence turns (bench/README.md, "context").
USER_PAGE_SHARE = 0.1
PAGE_SHARE = 0.2
SKILL_SHARE = 0.2
ITEM_SHARE = 0.25
MIN_ITEM_TOKENS = 40
SKILLS_SHOWN = 3
# Below this many tokens left, nothing more is tried.
MIN_REMAINING = 8


@dataclass
class Item:
    section: str
    memory_type: str
    instance: object
    body: str
    score: float | None = None
    tokens: int = 0  # of the rendered line, reference included
    sort_key: tuple = field(default_factory=tuple)


_DATE_FORMATS = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "week": "%Y-%m-%d"}


def _when(value: datetime | None, granularity: str = "exact") -> str:
    return "" if value is None else format(value, _DATE_FORMATS.get(granularity, "%Y-%m-%d %H:%M"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _page_lines(profile) -> list[str]:
    """A compiled page without its title, its headings as "Heading:" lines and no blank lines."""
    lines = []
    for line in profile.markdown.splitlines():
        line = line.strip()
        if not line or line.lstrip("# ") == profile.name and line.startswith("# "):
            continue
        lines.append(line.lstrip("#").strip() + ":" if line.startswith("#") else line)
    return lines


def item_body(memory_type: str, instance) -> str:
    """The line of one item, without its reference."""
    if memory_type == "message":
        speaker = instance.name or instance.role
        return f"{_when(instance.occurred_at)} · session {instance.session.session_id} #{instance.seq} · {speaker}: {_one_line(instance.content)}"
    if memory_type == "episodic":
        actor = f"{instance.actor}: " if instance.actor else ""
        return f"{_when(instance.occurred_at, instance.time_granularity)} {actor}{_one_line(instance.summary)}"
    if memory_type == "semantic":
        return f"{instance.name}: {_one_line(instance.summary)}"
    if memory_type == "profile":
        return "\n".join([instance.name, *_page_lines(instance)])
    if memory_type == "procedural":
        return f"{instance.name} ({instance.entry_type}): {_one_line(instance.description)} Instructions: {instance.instructions.strip()}"
    raise ValueError(f"no context line for {memory_type!r}")


def _sort_key(memory_type: str, instance) -> tuple:
    if memory_type == "message":
        return (instance.occurred_at, instance.session.session_id, instance.seq)
    if memory_type == "episodic":
        return (instance.occurred_at, str(instance.pk))
    return ()


def _item(section: str, memory_type: str, instance, score, cap: int) -> Item | None:
    # Counted with a three-digit reference after which the body's first word follows a space, as rendered.
    prefix = "[000] "
    body = fit_text(item_body(memory_type, instance), cap - estimate_tokens(prefix), marker="…")
    if not body:
        return None
    return Item(
        section=section,
        memory_type=memory_type,
        instance=instance,
        body=body,
        score=score,
        tokens=estimate_tokens(prefix + body),
        sort_key=_sort_key(memory_type, instance),
    )


class Block:
    """The items chosen so far and what the rendered block (headings, blank lines between sections) would cost."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.items: dict[str, list[Item]] = {section: [] for section in SECTIONS}
        self.headings = {section: estimate_tokens(f"## {title}") for section, title in SECTIONS.items()}

    def cost(self, extra: Item | None = None) -> int:
        tokens, lines, sections = 0, 0, 0
        for section, items in self.items.items():
            count = len(items) + (extra is not None and extra.section == section)
            if not count:
                continue
            sections += 1
            tokens += self.headings[section] + sum(item.tokens for item in items)
            lines += 1 + count
        if extra is not None:
            tokens += extra.tokens
        lines += max(sections - 1, 0)  # blank lines between sections
        return tokens + max(lines - 1, 0)

    def add(self, item: Item | None) -> bool:
        if item is None or self.cost(item) > self.max_tokens:
            return False
        self.items[item.section].append(item)
        return True

    def render(self) -> tuple[str, list[Item]]:
        lines, ordered = [], []
        for section, items in self.items.items():
            if not items:
                continue
            if section in ("events", "turns"):
                items = sorted(items, key=lambda item: item.sort_key)
            if lines:
                lines.append("")
            lines.append(f"## {SECTIONS[section]}")
            lines += [f"[{len(ordered) + number}] {item.body}" for number, item in enumerate(items, 1)]
            ordered += items
        return "\n".join(lines), ordered


@dataclass
class Context:
    text: str
    tokens: int
    items: list[Item]
    # The days a time named in the query stands for, as the search applied them (None: none).
    time_window: dict | None = None


def _user_page(reader: Reader, user_id: str):
    """The user's own entity's page, else that of the name their latest `user` turn is spoken under (one row read)."""
    pages = (
        reader.rows(SOURCES["profile"].model)
        .select_related("end_user", "entity")
        .filter(end_user__user_id=user_id, status="active", kind="person")
        .defer("embedding", "search_vector")
    )
    page = pages.order_by("-entity__is_user", "-compiled_at").first()
    if page is None or page.entity.is_user:
        return page
    name = (
        SOURCES["message"]
        .served_rows(reader)
        .filter(end_user__user_id=user_id, role="user")
        .exclude(name="")
        .order_by("-occurred_at")
        .values_list("name", flat=True)
        .first()
    )
    return pages.filter(entity__aliases__contains=[name.lower()]).order_by("-compiled_at").first() if name else None


def context_build(
    *,
    reader: Reader,
    user_id: str,
    query: str,
    max_tokens: int,
    memory_types: list[str] | None = None,
    task_session: bool = False,
    session_filter: str | None = None,
) -> Context:
    """The block for `query` (the latest message) within `max_tokens`; skills are shown for a task session,
    or when asked for by type. `session_filter` limits turns and memories to one session id."""
    types = [memory_type for memory_type in CONTEXT_TYPES if memory_types is None or memory_type in memory_types]
    block = Block(max_tokens)
    page = time_window = None
    if "profile" in types:
        page = _user_page(reader, user_id)
        if page is not None:
            block.add(_item("user", "profile", page, None, max(int(max_tokens * USER_PAGE_SHARE), MIN_ITEM_TOKENS)))
    if "procedural" in types and (task_session or memory_types):
        cap = max(int(max_tokens * SKILL_SHARE), MIN_ITEM_TOKENS)
        for retrieved in skills_rank(reader=reader, task=query or "", k=SKILLS_SHOWN, user_id=user_id):
            block.add(_item("skills", "procedural", retrieved.skill, retrieved.score, cap))
    ranked_types = [memory_type for memory_type in types if memory_type != "procedural"]
    if ranked_types:
        filters = {"user_id": user_id}
        if session_filter:
            filters["session_id"] = session_filter
        hits = search(
            reader=reader,
            query=query,
            memory_types=ranked_types,
            method=None,
            limit=settings.CONTEXT_CANDIDATES,
            filters=filters,
            # A mixed search keeps only SEARCH_PROFILE_HITS pages: reading more whole pages is wasted work.
            type_limits={"profile": settings.SEARCH_PROFILE_HITS},
        )
        time_window = hits.time_window.as_dict() if hits.time_window else None
        item_cap = max(int(max_tokens * ITEM_SHARE), MIN_ITEM_TOKENS)
        page_cap = max(int(max_tokens * PAGE_SHARE), MIN_ITEM_TOKENS)
        for hit in hits:
            if max_tokens - block.cost() < MIN_REMAINING:
                break
            memory_type = hit.source.memory_type
            if page is not None and hit.instance.pk == page.pk:
                continue
            cap = page_cap if memory_type == "profile" else item_cap
            block.add(_item(SECTION_OF_TYPE[memory_type], memory_type, hit.instance, hit.score, cap))
    while True:
        text, items = block.render()
        tokens = estimate_tokens(text)
        if tokens <= max_tokens:
            break
        # The accounting above errs high (references as three digits); this keeps the promise if it ever does not.
        block.items[items[-1].section].remove(items[-1])
    return Context(text=text, tokens=tokens, items=items, time_window=time_window)
