"""Topic pages: one user's memories and turns grouped by DBSCAN into topics, each compiled into a page
with its sources like a person's; a page keeps its id while its cluster lives, and is archived after.
"""

import json
import logging
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import BaseModel, StringConstraints

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import items_held
from apps.profiles.models import ItemType, Profile, TopicState
from apps.profiles.services.compile import (
    Evidence,
    _embed,
    _quote,
    page_archive,
    page_draft,
    page_store,
    sources_of,
)
from apps.providers.llm import kept
from apps.tenancy.models import EndUser

logger = logging.getLogger(__name__)

TITLE_MAX_CHARS = 120
# A turn shorter than this many words is small talk ("Thanks!", "See you"), not a topic.
MIN_TURN_WORDS = 6
LABEL_WORDS = 3
# The derived ε stays within these cosine distances (on centred vectors, 1 is unrelated).
EPS_BOUNDS = (0.1, 0.9)
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
STOPWORDS = frozenset(
    """the and for are but not you all any can had her was one our out has him his how man new now old see
    two way who did its let put say she too use that this with have from they will would there their what
    about which when make like time just know take into year your good some could them than then look only
    come over also back after work first well even want because these give most very been were much does
    really thanks thank yeah wow great awesome amazing cool nice love glad sounds sound hey hi hello sure
    lot lots things thing something anything everything got get getting going gonna yes okay what's it's
    i'm you're that's i've i'll i'd don't can't didn't isn't wasn't such more here where why being same
    those other should may might must still though while again ever never always maybe feel felt made
    so what've let's doing done went had has having kind kinds pretty super totally definitely""".split()
)


@dataclass
class Item:
    item_type: str
    item_id: str
    text: str
    at: object
    where: str
    seq: int = 0


def owner_items(*, organization_id, scope: str, end_user_id) -> tuple[list[Item], np.ndarray]:
    """The owner's embedded memories and spoken turns (no small talk), newest TOPIC_MAX_ITEMS first, with vectors."""
    owner = {"organization_id": organization_id, "scope": scope, "end_user_id": end_user_id}
    rows: list[tuple[Item, list]] = []
    limit = settings.TOPIC_MAX_ITEMS
    for item_type, model in ((ItemType.SEMANTIC, SemanticMemory), (ItemType.EPISODIC, EpisodicMemory)):
        memories = model.objects.filter(**owner, deleted_at__isnull=True, embedding__isnull=False).order_by(
            "-updated_at"
        )[:limit]
        for memory in memories:
            at = getattr(memory, "occurred_at", None) or memory.updated_at
            rows.append((Item(item_type, str(memory.pk), memory.summary, at, f"{item_type} memory"), memory.embedding))
    messages = (
        Message.objects.filter(**owner, role__in=(Message.Role.USER, Message.Role.ASSISTANT), embedding__isnull=False)
        .select_related("session")
        .only("id", "seq", "name", "content", "occurred_at", "embedding", "session__session_id")
        .order_by("-occurred_at", "-seq")[:limit]
    )
    for message in messages:
        if len(message.content.split()) < MIN_TURN_WORDS:
            continue
        speaker = f"{message.name}, " if message.name else ""
        where = f"{speaker}{message.session.session_id} #{message.seq}"
        item = Item(ItemType.MESSAGE, str(message.pk), message.content, message.occurred_at, where, message.seq)
        rows.append((item, message.embedding))
    rows.sort(key=lambda row: (row[0].at, row[0].seq, row[0].item_id), reverse=True)
    rows = rows[:limit]
    vectors = np.array([row[1] for row in rows], dtype=np.float32).reshape(len(rows), -1)
    return [row[0] for row in rows], vectors


def scope_mean(*, organization_id, scope: str) -> np.ndarray | None:
    """The mean of the scope's newest turns, all users together: every text a model embeds shares one direction
    (e5 puts unrelated turns at 0.85). One user's own mean would erase the topic they only ever talk about."""
    table = Message._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT avg(x.embedding)::text FROM (
                SELECT embedding FROM {table} WHERE organization_id = %s AND scope = %s AND embedding IS NOT NULL
                ORDER BY created_at DESC LIMIT %s) x""",
            [organization_id, scope, settings.TOPIC_MAX_ITEMS],
        )
        (value,) = cursor.fetchone()
    return None if value is None else np.array(json.loads(value), dtype=np.float32)


def _centred(vectors: np.ndarray, mean: np.ndarray | None) -> np.ndarray:
    centred = vectors - (vectors.mean(axis=0) if mean is None else mean)
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    return centred / np.where(norms == 0, 1, norms)


def derived_eps(similarities: np.ndarray, *, min_items: int, percentile: float) -> float:
    """The `percentile`-th percentile of the core distances (each row's cosine distance to its min_items-th nearest
    row, itself counted: DBSCAN's k-distance), within EPS_BOUNDS: how far distances spread depends on the embedding
    model, so ε comes from the items and about that share of them are cores."""
    core_distances = 1 + np.partition(-similarities, min_items - 1, axis=1)[:, min_items - 1]
    eps = float(np.percentile(core_distances, percentile))
    return round(min(max(eps, EPS_BOUNDS[0]), EPS_BOUNDS[1]), 4)


def clusters_of(
    vectors: np.ndarray, *, min_items: int, eps: float | None = None, mean: np.ndarray | None = None
) -> tuple[list[list[int]], float | None]:
    """DBSCAN by cosine distance on vectors centred on `mean`: row lists, largest first (the rest is noise),
    and the ε used (derived when `eps` is None). Quadratic in the rows, which TOPIC_MAX_ITEMS bounds."""
    if len(vectors) < min_items:
        return [], eps
    unit = _centred(vectors, mean)
    similarities = unit @ unit.T
    if eps is None:
        eps = derived_eps(similarities, min_items=min_items, percentile=settings.TOPIC_CLUSTER_EPS_PERCENTILE)
    neighbours = similarities >= 1 - eps
    core = neighbours.sum(axis=1) >= min_items
    label = np.full(len(unit), -1)
    clusters = []
    for start in np.nonzero(core)[0]:
        if label[start] >= 0:
            continue
        stack, label[start] = [int(start)], len(clusters)
        while stack:
            row = stack.pop()
            if core[row]:
                others = np.nonzero(neighbours[row] & (label < 0))[0]
                label[others] = len(clusters)
                stack += others.tolist()
        clusters.append(np.flatnonzero(label == len(clusters)).tolist())
    return sorted(clusters, key=lambda members: (-len(members), members[0])), eps


def _words(text: str) -> set[str]:
    return {word.strip("'-") for word in _WORD.findall(text.lower())} - STOPWORDS


def topic_label(members: list[Item], everything: list[Item]) -> str:
    """The cluster's most distinctive words: their share of its items times their IDF over all the owner's items."""
    inside = Counter(word for item in members for word in _words(item.text))
    overall = Counter(word for item in everything for word in _words(item.text))
    scored = sorted(
        ((count / len(members)) * math.log(len(everything) / overall[word]), word)
        for word, count in inside.items()
        if count >= 2 and len(word) > 2
    )
    words = [word for _, word in sorted(scored, key=lambda pair: (-pair[0], pair[1]))[:LABEL_WORDS]]
    if not words:
        words = sorted(inside, key=lambda word: (-inside[word], word))[:LABEL_WORDS] or ["misc"]
    return ", ".join(words).capitalize()


def _evidence(members: list[Item], vectors: np.ndarray) -> list[Evidence]:
    """At most TOPIC_MAX_EVIDENCE items, those nearest the cluster's centre, newest first."""
    centre = vectors.mean(axis=0)
    nearest = np.argsort(-(vectors @ centre), kind="stable")[: settings.TOPIC_MAX_EVIDENCE]
    chosen = sorted((members[i] for i in nearest), key=lambda item: (item.at, item.seq, item.item_id), reverse=True)
    return [
        Evidence(
            item_type=item.item_type,
            item_id=item.item_id,
            section="Topic",
            quote=_quote(item.text),
            at=item.at,
            where=item.where,
        )
        for item in chosen
    ]


def _rules_page(label: str, evidence: list[Evidence]) -> str:
    return "\n".join([f"# {label}", "", *(item.line() for item in evidence)]) + "\n"


class TopicPageAnswer(BaseModel):
    """What the topic page compiler answers."""

    title: str
    markdown: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    used: Annotated[list[int], kept(int)]


TOPIC_PROMPT = (
    "You write a concise wiki page about one topic of a user's memory from numbered evidence. Use "
    "only the evidence; never add anything it does not say. Give it a short title, then the facts, "
    "events, plans and opinions on the topic under Markdown headings, each line ending with the "
    'numbers it rests on, like [3]. Answer with JSON: {"title": "...", "markdown": "...", "used": [numbers]}.'
)


def _match(clusters: list[set[str]], pages: list[Profile]) -> dict[int, Profile]:
    """Each cluster to the page quoting most of its items (each page to one cluster at most)."""
    quoted = {page.pk: {ref["item_id"] for ref in page.source_refs} for page in pages}
    pairs = sorted(
        ((len(members & quoted[page.pk]), index, page) for index, members in enumerate(clusters) for page in pages),
        key=lambda pair: (-pair[0], pair[1], str(pair[2].pk)),
    )
    matched: dict[int, Profile] = {}
    for overlap, index, page in pairs:
        if overlap and index not in matched and page not in matched.values():
            matched[index] = page
    return matched


def owner_topics_compile(*, end_user: EndUser, scope: str, task=None, reason: str = "compile") -> dict:
    """Compiles one owner's topic pages; returns the ε used and the counts of what it did."""
    started = timezone.now()
    organization = end_user.organization
    items, vectors = owner_items(organization_id=organization.pk, scope=scope, end_user_id=end_user.pk)
    clusters, eps = clusters_of(
        vectors,
        eps=settings.TOPIC_CLUSTER_EPS,
        min_items=settings.TOPIC_CLUSTER_MIN_ITEMS,
        mean=scope_mean(organization_id=organization.pk, scope=scope),
    )
    result = {
        "items": len(items),
        "eps": eps,
        "topics": len(clusters),
        "created": 0,
        "updated": 0,
        "unchanged": 0,
        "archived": 0,
        "noise": len(items) - sum(map(len, clusters)),
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }
    owner = {"organization": organization, "scope": scope, "end_user": end_user}
    pages = list(Profile.objects.filter(**owner, kind=Profile.Kind.TOPIC).order_by("created_at", "id"))
    matched = _match([{items[i].item_id for i in members} for members in clusters], pages)
    for index, members in enumerate(clusters):
        cluster = [items[i] for i in members]
        label = topic_label(cluster, items)
        evidence = _evidence(cluster, vectors[members])
        draft = page_draft(
            rules_markdown=_rules_page(label, evidence),
            evidence=evidence,
            prompt=TOPIC_PROMPT,
            head=f"Keywords: {label}\nEvidence:\n",
            answer=TopicPageAnswer,
            organization=organization,
            task=task,
            purpose="compile_topics",
        )
        title = (draft.answer.title.strip()[:TITLE_MAX_CHARS] or label) if draft.answer else label
        markdown = draft.markdown
        model = draft.model
        usage = draft.usage
        used = draft.used or evidence[: draft.shown]
        why = f"{reason}; the model's answer was unusable, rules page" if draft.unusable else reason
        result["prompt_tokens"] += usage.get("prompt_tokens", 0)
        result["completion_tokens"] += usage.get("completion_tokens", 0)
        candidate = Profile(name=title[:TITLE_MAX_CHARS], markdown=markdown)
        _embed(candidate)
        page = matched.get(index) or Profile(**owner, kind=Profile.Kind.TOPIC)
        created = page._state.adding
        with transaction.atomic():
            # The label is drawn from every item of the owner's: all of them are held until it is stored.
            items_held(organization_id=organization.pk, items=[(item.item_type, item.item_id) for item in items])
            changed = page_store(
                profile=page, candidate=candidate, sources=sources_of(used), model=model, usage=usage, reason=why
            )
        result["created" if created else "updated" if changed else "unchanged"] += 1
    for page in pages:
        if page not in matched.values() and page.status == Profile.Status.ACTIVE:
            page_archive(
                profile=page, detail="The items of this topic no longer form a cluster; the page was archived."
            )
            result["archived"] += 1
    TopicState.objects.update_or_create(**owner, defaults={"compiled_at": started})
    return result


# What an organisation's compile adds up over its owners (each owner's ε is their own).
SUMMED = tuple("items topics created updated unchanged archived noise prompt_tokens completion_tokens".split())


def topics_compile(*, organization, scope: str | None = None, end_user=None, task=None, lock=None) -> dict:
    """Compiles the topic pages of every owner of the organisation (or of one scope, or one user).
    `lock(end_user)` returns a context manager held around each owner's compile."""
    from contextlib import nullcontext

    started = time.perf_counter()
    owners = items_owners(organization=organization, scope=scope, end_user=end_user)
    users = {user.pk: user for user in EndUser.objects.filter(pk__in={end_user_id for _, end_user_id in owners})}
    totals = {"scopes": sorted({owner_scope for owner_scope, _ in owners}), "owners": 0} | dict.fromkeys(SUMMED, 0)
    for owner_scope, end_user_id in owners:
        end_user = users[end_user_id]
        with lock(end_user) if lock else nullcontext():
            result = owner_topics_compile(end_user=end_user, scope=owner_scope, task=task)
        totals["owners"] += 1
        for key in SUMMED:
            totals[key] += result[key]
    totals["seconds"] = round(time.perf_counter() - started, 3)
    return totals


def items_owners(*, organization, scope: str | None = None, end_user=None) -> list[tuple[str, object]]:
    """(scope, end user id) of every owner with turns or memories, in a stable order."""
    where = Q(organization=organization)
    if scope:
        where &= Q(scope=scope)
    if end_user is not None:
        where &= Q(end_user=end_user)
    owners = set()
    for model in (Message, SemanticMemory, EpisodicMemory):
        owners |= set(model.objects.filter(where).values_list("scope", "end_user_id").distinct())
    return sorted(owners, key=lambda owner: (owner[0], str(owner[1])))
