"""Profile compilation: one page per person of a user's memory, every line traceable to an item; written by
rules offline, by the LLM from numbered evidence otherwise, and a new revision only when it changed.
"""

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, StringConstraints

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import items_held
from apps.profiles.models import QUOTE_MAX_CHARS, Entity, ItemType, LintFinding, Profile, ProfileRevision, ProfileSource
from apps.profiles.services.entities import page_recompile_enqueue
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.providers.llm import LLMOutputError, chat_json, kept, llm_enabled, parse_answer
from apps.providers.tokens import estimate_tokens, room_for

RULES_MODEL = "rules"
# First-person statements and the kind of fact they state, checked in this order.
_KIND_PATTERNS = {
    "Preferences": r"\b(?:i|we)\s+(?:really\s+|also\s+|just\s+)?(?:love|like|enjoy|prefer|adore|hate|dislike|can't stand)\b|\bmy favou?rite\b|\bi'm (?:a (?:big )?fan|into|passionate)\b",
    "Relationships": r"\bmy (?:wife|husband|partner|boyfriend|girlfriend|kids?|children|son|daughter|mom|mum|mother|dad|father|parents?|sister|brother|siblings?|family|friends?|grand\w+|aunt|uncle|cousin|colleague|boss|dog|cat|pets?)\b",
    "Constraints": r"\b(?:i|we) (?:can't|cannot|don't|do not|never|am allergic|'m allergic)\b|\ballergic\b",
    "Plans": r"\b(?:i|we)(?:'m| am| are|'re)? (?:going to|gonna|planning|plan|hoping|hope|want|will|'ll)\b|\bi'll\b|\bnext (?:week|month|year)\b",
    "Activities": r"\b(?:i|we)(?:'ve| have)? (?:been|started|joined|go|went|do|did|took|take|play|played|run|ran|paint|painted|volunteer\w*|attend\w*|work(?:ed)? on)\b",
    # Any other first-person statement is a fact about the speaker.
    "Facts": r"\b(?:i|i'm|i've|i'd|we|my|our)\b",
}
KINDS = tuple((kind, re.compile(pattern, re.I)) for kind, pattern in _KIND_PATTERNS.items())
SECTION_ORDER = [kind for kind, _ in KINDS] + ["From memories", "What others said"]
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Evidence:
    item_type: str
    item_id: str
    section: str
    quote: str
    at: datetime
    where: str  # "conv-26-s1 #3", or the memory type
    seq: int = 0  # turn and sentence order break ties between items of the same time
    position: int = 0

    def line(self) -> str:
        return f'- "{self.quote}" ({self.at:%Y-%m-%d}, {self.where})'

    def source(self) -> dict:
        return {"item_type": self.item_type, "item_id": self.item_id, "quote": self.quote}


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_MAX_CHARS else text[: QUOTE_MAX_CHARS - 1] + "…"


def _kind(sentence: str) -> str | None:
    if sentence.endswith("?"):  # a question states nothing about the speaker
        return None
    return next((kind for kind, pattern in KINDS if pattern.search(sentence)), None)


def profile_evidence(*, entity: Entity) -> list[Evidence]:
    """Every quotable line about the person, newest first (turns by sequence within a session)."""
    by_type: dict[str, dict] = {t: {} for t in ItemType.values}
    for mention in entity.mentions.order_by("-occurred_at", "-seq"):
        by_type[mention.item_type][mention.item_id] = mention
    messages = Message.objects.filter(pk__in=list(by_type[ItemType.MESSAGE])).select_related("session")
    evidence = []
    for message in messages:
        mention = by_type[ItemType.MESSAGE][message.pk]
        turn = {"at": message.occurred_at, "where": f"{message.session.session_id} #{message.seq}", "seq": message.seq}
        for position, sentence in enumerate(_SENTENCES.split(message.content)):
            sentence = sentence.strip()
            if len(sentence) < 8:
                continue
            if mention.spoken:
                section = _kind(sentence)
            else:
                named = any(re.search(rf"\b{re.escape(alias)}\b", sentence.lower()) for alias in entity.aliases)
                section = "What others said" if named else None
            if section:
                evidence.append(
                    Evidence(
                        item_type=ItemType.MESSAGE,
                        item_id=str(message.pk),
                        section=section,
                        quote=_quote(sentence),
                        **turn,
                        position=-position,
                    )
                )
    for item_type, model in ((ItemType.EPISODIC, EpisodicMemory), (ItemType.SEMANTIC, SemanticMemory)):
        for memory in model.objects.filter(pk__in=list(by_type[item_type]), deleted_at__isnull=True):
            at = getattr(memory, "occurred_at", None) or memory.updated_at
            evidence.append(
                Evidence(
                    item_type=item_type,
                    item_id=str(memory.pk),
                    section="From memories",
                    quote=_quote(memory.summary),
                    at=at,
                    where=f"{item_type} memory",
                )
            )
    evidence.sort(key=lambda item: (item.at, item.seq, item.position, item.item_id), reverse=True)
    return evidence


def _rules_page(entity: Entity, evidence: list[Evidence]) -> str:
    lines = [f"# {entity.name}", ""]
    for section in SECTION_ORDER:
        items = [item for item in evidence if item.section == section]
        if items:
            lines += [f"## {section}", *(item.line() for item in items), ""]
    return "\n".join(lines).strip() + "\n"


class ProfilePageAnswer(BaseModel):
    """What the profile compiler answers."""

    markdown: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    used: Annotated[list[int], kept(int)]


COMPILE_PROMPT = (
    "You write a concise profile page of one person from numbered evidence. Use only the evidence; "
    "never add anything it does not say. Group stable facts, preferences, relationships, plans, "
    "recurring activities and constraints under Markdown headings, and end each line with the "
    'numbers it rests on, like [3]. Answer with JSON: {"markdown": "...", "used": [numbers]}.'
)


@dataclass(frozen=True)
class EvidencePage:
    """A page the model wrote from numbered evidence."""

    answer: BaseModel  # the model's answer, parsed
    used: list[Evidence]  # the items it cites, in the order it cites them
    shown: int  # how many of the items fitted in the prompt (the first ones)
    usage: dict  # the LLM call's usage (model, token counts)


def evidence_page(
    *, prompt: str, head: str, evidence: list[Evidence], answer, organization, task, purpose: str
) -> EvidencePage:
    """The page the model writes from the evidence, as many items as fit LLM_MAX_PROMPT_TOKENS."""
    # The evidence as numbered lines, as many as fit LLM_MAX_PROMPT_TOKENS beside `prompt` and `head`.
    left = room_for(prompt, head)
    lines = []
    for number, item in enumerate(evidence, 1):
        line = f"[{number}] ({item.at:%Y-%m-%d}) {item.quote}"
        left -= estimate_tokens(line) + 1
        if left < 0:
            break
        lines.append(line)
    usage: dict = {}
    data = chat_json(
        messages=[{"role": "system", "content": prompt}, {"role": "user", "content": head + "\n".join(lines)}],
        answer=answer,
        organization=organization,
        task=task,
        purpose=purpose,
        usage=usage,
    )
    page = parse_answer(answer, data)
    used = [evidence[number - 1] for number in dict.fromkeys(page.used) if 0 < number <= len(lines)]
    return EvidencePage(answer=page, used=used, shown=len(lines), usage=usage)


@dataclass(frozen=True)
class PageDraft:
    """A page before it is stored: the model's, or the rules page when there is no model or its answer
    was unusable."""

    markdown: str
    used: list[Evidence]  # the items the page rests on
    shown: int  # how many of the first items the page was written from
    model: str
    usage: dict
    answer: BaseModel | None = None  # the model's answer; None: the rules page
    unusable: bool = False  # the model answered something unusable, so the rules page stands


def page_draft(*, rules_markdown: str, evidence: list[Evidence], **written) -> PageDraft:
    """The model's page from the evidence (`written`: evidence_page's prompt, head, answer, organization,
    task and purpose) when an LLM is configured, else `rules_markdown`."""
    rules = PageDraft(markdown=rules_markdown, used=evidence, shown=len(evidence), model=RULES_MODEL, usage={})
    if not llm_enabled():
        return rules
    try:
        page = evidence_page(evidence=evidence, **written)
    except LLMOutputError:
        return replace(rules, unusable=True)
    return PageDraft(
        markdown=page.answer.markdown + "\n",
        used=page.used,
        shown=page.shown,
        model=page.usage.get("model") or settings.LLM_MODEL,
        usage=page.usage,
        answer=page.answer,
    )


def _embed(profile: Profile) -> None:
    (profile.embedding,) = embed_texts([profile.embedding_text()])
    profile.embedding_model = embedding_model_name()


def profile_compile(*, entity: Entity, task=None, reason: str = "new mentions") -> dict:
    """Compiles one entity's page; the LLM and the embedding run before the transaction, locking no row meanwhile."""
    evidence = profile_evidence(entity=entity)
    if not evidence:
        profile = Profile.objects.filter(entity=entity).first()
        return page_archive(profile=profile) if profile else {"profile": None, "changed": False}
    evidence = evidence[: settings.PROFILE_MAX_EVIDENCE]
    draft = page_draft(
        rules_markdown=_rules_page(entity, evidence),
        evidence=evidence,
        prompt=COMPILE_PROMPT,
        head=f"Person: {entity.name}\nEvidence:\n",
        answer=ProfilePageAnswer,
        organization=entity.organization,
        task=task,
        purpose="compile_profile",
    )
    if draft.unusable:
        reason = f"{reason}; the model's answer was unusable, rules page"
    markdown = draft.markdown
    model = draft.model
    usage = draft.usage
    used = draft.used
    sources = sources_of(used)
    candidate = Profile(name=entity.name, markdown=markdown)
    _embed(candidate)
    with transaction.atomic():
        entity = Entity.objects.select_for_update().get(pk=entity.pk)
        # Every item shown (an LLM page may use what it does not cite), held until the page is stored.
        items_held(organization_id=entity.organization_id, items=[(e.item_type, e.item_id) for e in evidence])
        profile = Profile.objects.filter(entity=entity).first() or Profile(
            entity=entity, organization_id=entity.organization_id, scope=entity.scope, end_user_id=entity.end_user_id
        )
        changed = page_store(
            profile=profile, candidate=candidate, sources=sources, model=model, usage=usage, reason=reason
        )
    result = {"profile": str(profile.pk), "revision": profile.revision, "changed": changed}
    return result | {"sources": len(sources)} if changed else result


def sources_of(used: list[Evidence]) -> dict[tuple, dict]:
    """One source per item; several sentences of one turn are quoted together."""
    sources: dict[tuple, dict] = {}
    for item in used:
        source = sources.setdefault((item.item_type, item.item_id), {**item.source(), "quote": ""})
        source["quote"] = _quote(" … ".join(filter(None, [source["quote"], item.quote])))
    return sources


def page_store(*, profile: Profile, candidate: Profile, sources: dict, model: str, usage: dict, reason: str) -> bool:
    """Stores a compiled page in the caller's transaction: a new revision only when name, text or sources changed;
    either way the page is active and its stale and orphan findings resolved. Returns whether it changed."""
    current = {} if profile._state.adding else {(s.item_type, str(s.item_id)): s.quote for s in profile.sources.all()}
    if (
        not profile._state.adding
        and profile.name == candidate.name
        and profile.markdown == candidate.markdown
        and current == {k: v["quote"] for k, v in sources.items()}
    ):
        if profile.status != Profile.Status.ACTIVE:
            profile.status = Profile.Status.ACTIVE
            profile.save(update_fields=["status", "updated_at"])
        _resolve(profile, kinds=[LintFinding.Kind.STALE, LintFinding.Kind.ORPHAN])
        return False
    profile.name, profile.markdown, profile.status = candidate.name, candidate.markdown, Profile.Status.ACTIVE
    profile.embedding, profile.embedding_model = candidate.embedding, candidate.embedding_model
    profile.source_refs = [{"item_type": key[0], "item_id": key[1]} for key in sources]
    profile.revision += 1
    profile.compiled_at = timezone.now()
    profile.save()
    profile.sources.all().delete()
    ProfileSource.objects.bulk_create(
        ProfileSource(profile=profile, item_type=key[0], item_id=key[1], quote=value["quote"])
        for key, value in sources.items()
    )
    ProfileRevision.objects.create(
        profile=profile,
        number=profile.revision,
        markdown=candidate.markdown,
        model=model,
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
        sources=list(sources.values()),
        reason=reason[:255],
    )
    _resolve(profile, kinds=[LintFinding.Kind.STALE, LintFinding.Kind.ORPHAN])
    return True


def page_archive(
    *, profile: Profile, detail: str = "Nothing this page could quote is left; the page was archived."
) -> dict:
    """Archives the page (hidden from search), its text cleared. The archive is the `orphan` finding's outcome,
    so it is recorded as one, and it resolves an open `stale` finding."""
    with transaction.atomic():
        profile = Profile.objects.select_for_update().filter(pk=profile.pk).first()
        if profile is None:
            return {"profile": None, "changed": False}
        if profile.status != Profile.Status.ARCHIVED or profile.markdown:
            profile.status, profile.markdown, profile.source_refs = Profile.Status.ARCHIVED, "", []
            profile.save(update_fields=["status", "markdown", "source_refs", "updated_at"])
            profile.sources.all().delete()
            if not profile.findings.filter(kind=LintFinding.Kind.ORPHAN, status=LintFinding.Status.OPEN).exists():
                LintFinding.objects.create(
                    profile=profile, kind=LintFinding.Kind.ORPHAN, severity=LintFinding.Severity.WARNING, detail=detail
                )
        _resolve(profile, kinds=[LintFinding.Kind.STALE], by="archive")
        return {"profile": str(profile.pk), "changed": True, "archived": True}


def _resolve(profile: Profile, *, kinds: list[str], by: str = "recompile") -> None:
    profile.findings.filter(status=LintFinding.Status.OPEN, kind__in=kinds).update(
        status=LintFinding.Status.RESOLVED, resolved_by=by, resolved_at=timezone.now(), updated_at=timezone.now()
    )


def profiles_clear_for_recompile(*, profile_ids: list, reason: str) -> int:
    """Erasure took some of these pages' sources: their text, which may quote them, is cleared and recompiled."""
    profiles = list(Profile.objects.filter(pk__in=profile_ids).select_related("organization", "end_user"))
    for profile in profiles:
        with transaction.atomic():
            Profile.objects.filter(pk=profile.pk).update(
                markdown="", source_refs=[], embedding=None, embedding_model="", updated_at=timezone.now()
            )
            LintFinding.objects.create(
                profile=profile, kind=LintFinding.Kind.STALE, severity=LintFinding.Severity.INFO, detail=reason
            )
            page_recompile_enqueue(profile=profile)
    return len(profiles)
