"""Entity projection: the people, places and organisations one user's memory names, the items that
mention them, and who is seen with whom; projecting a session replaces its mentions, so it is idempotent.
"""

import re
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import memories_held
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import enqueue, enqueue_debounced, task_run_sooner
from apps.profiles.models import NAME_MAX_LENGTH, Edge, Entity, ItemType, Mention, Profile, TopicState

COMPILE_PROFILE = "compile_profile"
COMPILE_TOPICS = "compile_topics"
LINT_PROFILES = "lint_profiles"

SPOKEN_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")
# A subject a memory names: one or two capitalised words (a first name, or a first and a last name).
_PROPER_NOUN = re.compile(r"[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|[\n\"“(]\s*)$")
_PLACE_CUE = re.compile(r"\b(?:in|to|from|at|near|visit|visited|visiting)\s+$", re.IGNORECASE)
# Words before a name that make it an organisation: where someone works, studies, volunteers, belongs.
_ORGANIZATION_CUE = re.compile(
    r"\b(?:work(?:s|ed|ing)? (?:at|for)|(?:job|position|internship) (?:at|with)|employed (?:at|by)|"
    r"intern(?:s|ed|ing)? at|volunteer(?:s|ed|ing)? (?:at|with|for)|joined|member of|stud(?:y|ying|ied) at|"
    r"graduated from|enrolled (?:at|in)|hired by|donat(?:e|ed|ing) to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
# A name ending in one of these words is an organisation's ("Northwind Bank", "Stanford University").
ORGANIZATION_WORDS = frozenset(
    """inc corp corporation llc ltd company university college school academy bank hospital clinic foundation
    institute club church association society agency center centre group studio studios labs council
    museum library charity""".split()
)
PLACE, ORGANIZATION = "place", "organization"
# Capitalised words that are not names, even mid-sentence.
NOT_NAMES = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december christmas easter thanksgiving halloween i i'm i've i'll i'd
    the this that these those there then thanks thank hey hello wow yes yeah okay god mom dad mum mother
    father grandma grandpa english spanish french german lgbtq lgbt covid internet instagram facebook
    youtube google tiktok netflix spotify amazon iphone android mr mrs ms dr sir madam""".split()
)


def _speaker(message: Message, user_id: str) -> str | None:
    if message.name:
        return message.name.strip()[:NAME_MAX_LENGTH] or None
    if message.role == Message.Role.USER:
        return user_id[:NAME_MAX_LENGTH]
    return None


def _candidates(text: str) -> list[tuple[str, str | None]]:
    """(name, cue) for each capitalised word not opening a sentence, cue being `organization` after "works at",
    `place` after "in", else None; two such words in a row are one name ("Northwind Bank")."""
    found: list[tuple[str, str | None]] = []
    previous_end = None
    for match in _CAPITALISED.finditer(text):
        word, before = match.group(), text[: match.start()]
        if _SENTENCE_START.search(before) or word.lower() in NOT_NAMES:
            previous_end = None
            continue
        if previous_end is not None and text[previous_end : match.start()] == " " and " " not in found[-1][0]:
            found[-1] = (f"{found[-1][0]} {word}", found[-1][1])
        else:
            cue = ORGANIZATION if _ORGANIZATION_CUE.search(before[-40:]) else None
            found.append((word, cue or (PLACE if _PLACE_CUE.search(before[-12:]) else None)))
        previous_end = match.end()
    return found


def name_kind(name: str, cues: list[str | None]) -> str:
    """An organisation by its last word or by most of its cues, a place by most of its cues, else a person."""
    if name.split()[-1].lower() in ORGANIZATION_WORDS or cues.count(ORGANIZATION) * 2 > len(cues):
        return Entity.Kind.ORGANIZATION
    return Entity.Kind.PLACE if cues.count(PLACE) * 2 > len(cues) else Entity.Kind.PERSON


def _alias_pattern(aliases: dict[str, Entity]) -> re.Pattern | None:
    """One alternation of every alias, longest first, so "Jon Smith" wins over "Jon"."""
    if not aliases:
        return None
    return re.compile(r"\b(" + "|".join(re.escape(alias) for alias in sorted(aliases, key=len, reverse=True)) + r")\b")


def _named_in(text: str, aliases: dict[str, Entity], pattern: re.Pattern | None) -> set[Entity]:
    if pattern is None:
        return set()
    return {aliases[match] for match in pattern.findall(text.lower())}


def _entity(owner: dict, aliases: dict[str, Entity], name: str, kind: str, *, is_user: bool = False) -> Entity:
    alias = name.lower()
    if alias in aliases:
        return aliases[alias]
    entity, _ = Entity.objects.get_or_create(
        **owner, kind=kind, name=name, defaults={"aliases": [alias], "is_user": is_user}
    )
    aliases[alias] = entity
    return entity


def _known_aliases(owner: dict) -> dict[str, Entity]:
    aliases = {}
    for entity in Entity.objects.filter(**owner):
        for alias in entity.aliases or [entity.name.lower()]:
            aliases.setdefault(alias, entity)
    return aliases


@transaction.atomic
def session_project(*, session: Session) -> dict:
    """Replaces the mentions of a session's turns and of the memories learned from them, then recomputes edges."""
    owner = {"organization_id": session.organization_id, "scope": session.scope, "end_user_id": session.end_user_id}
    user_id = session.end_user.user_id
    messages = list(
        Message.objects.filter(session=session, role__in=SPOKEN_ROLES)
        .only("id", "seq", "role", "name", "content", "occurred_at", "session_id")
        .order_by("seq")
    )
    turn_ids = [message.pk for message in messages]
    memories = [
        memory
        for model in (EpisodicMemory, SemanticMemory)
        for memory in model.objects.filter(**owner, deleted_at__isnull=True, source_message_ids__overlap=turn_ids)
    ]
    # Until this commits no erasure of what was read can run (one that ran since makes the task retry).
    memories_held(organization_id=session.organization_id, memories=memories, turn_ids=turn_ids)
    aliases = _known_aliases(owner)

    # Names: speakers always; other capitalised names when they are known already or recur.
    speaker_of = {}
    for message in messages:
        if speaker := _speaker(message, user_id):
            speaker_of[message.pk] = _entity(owner, aliases, speaker, Entity.Kind.PERSON, is_user=not message.name)
    recurring: dict[str, list[str | None]] = {}
    for message in messages:
        for name, cue in _candidates(message.content):
            recurring.setdefault(name, []).append(cue)
    for name, cues in recurring.items():
        kind = name_kind(name, cues)
        # A name seen once is kept only when the words around it say it is an organisation.
        if name.lower() in aliases or len(cues) >= 2 or kind == Entity.Kind.ORGANIZATION:
            _entity(owner, aliases, name, kind)
    for memory in memories:
        subject = getattr(memory, "actor", "") or getattr(memory, "name", "")
        if subject and _PROPER_NOUN.fullmatch(subject.strip()):
            _entity(owner, aliases, subject.strip(), name_kind(subject.strip(), []))

    # Mentions of this session's items, replaced wholesale.
    pattern = _alias_pattern(aliases)
    item_ids = turn_ids + [memory.pk for memory in memories]
    existing = Mention.objects.filter(item_id__in=item_ids, entity__end_user_id=session.end_user_id)
    before = dict(existing.values_list("entity_id").annotate(n=Count("pk")).order_by())
    existing.delete()
    mentions = [
        Mention(
            entity=entity,
            item_type=ItemType.MESSAGE,
            item_id=message.pk,
            session_id=session.pk,
            seq=message.seq,
            occurred_at=message.occurred_at,
            spoken=entity == speaker_of.get(message.pk),
        )
        for message in messages
        for entity in _named_in(message.content, aliases, pattern) | ({speaker_of.get(message.pk)} - {None})
    ]
    seq_of = {message.pk: message.seq for message in messages}
    for memory in memories:
        text = " ".join(
            filter(None, [getattr(memory, "actor", ""), getattr(memory, "name", ""), memory.summary, memory.details])
        )
        first_turn = min((seq_of[i] for i in memory.source_message_ids if i in seq_of), default=None)
        item_type = ItemType.EPISODIC if isinstance(memory, EpisodicMemory) else ItemType.SEMANTIC
        occurred_at = getattr(memory, "occurred_at", None) or memory.updated_at
        mentions += [
            Mention(
                entity=entity,
                item_type=item_type,
                item_id=memory.pk,
                session_id=session.pk,
                seq=first_turn,
                occurred_at=occurred_at,
            )
            for entity in _named_in(text, aliases, pattern)
        ]
    Mention.objects.bulk_create(mentions)
    owner_edges_recompute(end_user_id=session.end_user_id, organization_id=session.organization_id, scope=session.scope)

    after = Counter(mention.entity_id for mention in mentions)
    changed = sorted(
        str(entity_id) for entity_id in set(before) | set(after) if before.get(entity_id) != after.get(entity_id)
    )
    for entity_id in changed:
        profile_compile_enqueue(
            entity_id=entity_id,
            organization=session.organization,
            scope=session.scope,
            new_mentions=abs(after.get(entity_id, 0) - before.get(entity_id, 0)),
        )
    topics_due_enqueue(organization=session.organization, scope=session.scope, end_user_id=session.end_user_id)
    return {"mentions": len(mentions), "entities": len(set(after)), "changed_entities": len(changed)}


def owner_edges_recompute(*, organization_id, scope: str, end_user_id) -> None:
    """Rebuilds one owner's co-occurrence edges and mention counts from the mentions, in SQL."""
    entities = Entity.objects.filter(organization_id=organization_id, scope=scope, end_user_id=end_user_id)
    Edge.objects.filter(Q(source__in=entities) | Q(target__in=entities)).delete()
    entity_ids = list(entities.values_list("pk", flat=True))
    if not entity_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {Edge._meta.db_table} (source_id, target_id, weight, evidence)
            SELECT a.entity_id, b.entity_id, count(*), '[]'::jsonb
            FROM {Mention._meta.db_table} a
            JOIN {Mention._meta.db_table} b ON b.item_id = a.item_id AND b.item_type = a.item_type AND b.entity_id > a.entity_id
            WHERE a.entity_id = ANY(%s) AND b.entity_id = ANY(%s)
            GROUP BY a.entity_id, b.entity_id
            """,
            [entity_ids, entity_ids],
        )
        cursor.execute(
            f"""
            UPDATE {Edge._meta.db_table} e SET evidence = (
                SELECT coalesce(jsonb_agg(x.item ORDER BY x.at DESC), '[]'::jsonb) FROM (
                    SELECT jsonb_build_object('item_type', a.item_type, 'item_id', a.item_id,
                                              'session_id', a.session_id, 'seq', a.seq) AS item, a.occurred_at AS at
                    FROM {Mention._meta.db_table} a JOIN {Mention._meta.db_table} b
                      ON b.item_id = a.item_id AND b.item_type = a.item_type
                    WHERE a.entity_id = e.source_id AND b.entity_id = e.target_id
                    ORDER BY a.occurred_at DESC, a.item_id LIMIT %s
                ) x
            )
            WHERE e.source_id = ANY(%s)
            """,
            [Edge.EVIDENCE_KEPT, entity_ids],
        )
        cursor.execute(
            f"""
            UPDATE {Entity._meta.db_table} en SET mention_count =
                (SELECT count(*) FROM {Mention._meta.db_table} m WHERE m.entity_id = en.id)
            WHERE en.id = ANY(%s)
            """,
            [entity_ids],
        )


def profile_compile_enqueue(*, entity_id, organization, scope: str, new_mentions: int = 0) -> MemoryTask:
    """Debounced: changes join a compile waiting PROFILE_COMPILE_DEBOUNCE_SECONDS, which runs at once
    when it has gathered PROFILE_COMPILE_AFTER_MENTIONS new mentions."""
    task = enqueue_debounced(
        COMPILE_PROFILE,
        {"entity": str(entity_id)},
        key=f"compile_profile:{entity_id}",
        delay=settings.PROFILE_COMPILE_DEBOUNCE_SECONDS,
        organization=organization,
        scope=scope,
    )
    if new_mentions:
        with transaction.atomic():
            waiting = MemoryTask.objects.select_for_update().filter(pk=task.pk, status=MemoryTask.Status.QUEUED).first()
            if waiting is None:
                return task
            gathered = waiting.payload.get("new_mentions", 0) + new_mentions
            waiting.payload = {**waiting.payload, "new_mentions": gathered}
            waiting.save(update_fields=["payload", "updated_at"])
        if gathered >= settings.PROFILE_COMPILE_AFTER_MENTIONS:
            task_run_sooner(task=waiting, run_after=timezone.now())
        return waiting
    return task


def profiles_lint_enqueue(*, organization=None) -> MemoryTask:
    """Lint of every organisation's pages (the beat) or of one (after an erasure): one waiting run each."""
    if organization is None:
        return enqueue(LINT_PROFILES, {}, idempotency_key=LINT_PROFILES)
    payload = {"organization": str(organization.pk)}
    return enqueue(
        LINT_PROFILES, payload, organization=organization, idempotency_key=f"{LINT_PROFILES}:{organization.pk}"
    )


def new_items_since(*, organization_id, scope: str, end_user_id) -> tuple[int, object]:
    """Spoken turns and memories the owner gained since their topics were last compiled, and when that was."""
    owner = {"organization_id": organization_id, "scope": scope, "end_user_id": end_user_id}
    state = TopicState.objects.filter(**owner).first()
    since = {"created_at__gt": state.compiled_at} if state else {}
    count = Message.objects.filter(**owner, **since, role__in=SPOKEN_ROLES).count()
    for model in (SemanticMemory, EpisodicMemory):
        count += model.objects.filter(**owner, **since, deleted_at__isnull=True).count()
    return count, state.compiled_at if state else None


def topics_due_enqueue(*, organization, scope: str, end_user_id) -> MemoryTask | None:
    """After TOPIC_COMPILE_MIN_ITEMS new items, a compile waits until TOPIC_COMPILE_AFTER_DAYS after the last
    one (or now); TOPIC_COMPILE_AFTER_ITEMS new items run it at once."""
    new, compiled_at = new_items_since(organization_id=organization.pk, scope=scope, end_user_id=end_user_id)
    if new < settings.TOPIC_COMPILE_MIN_ITEMS:
        return None
    wait = timedelta(days=settings.TOPIC_COMPILE_AFTER_DAYS)
    delay = (compiled_at + wait - timezone.now()).total_seconds() if compiled_at else wait.total_seconds()
    task = enqueue_debounced(
        COMPILE_TOPICS,
        {"organization": str(organization.pk), "scope": scope, "end_user": str(end_user_id)},
        key=f"{COMPILE_TOPICS}:due:{organization.pk}:{scope}:{end_user_id}",
        delay=max(delay, 0),
        organization=organization,
        scope=scope,
    )
    if new >= settings.TOPIC_COMPILE_AFTER_ITEMS and task.status == MemoryTask.Status.QUEUED:
        task_run_sooner(task=task, run_after=timezone.now())
    return task


def topics_compile_request(*, organization, scope: str | None = None, end_user=None, client=None) -> MemoryTask:
    """A compile someone asked for runs at once; asking again while one for the same target waits joins it."""
    payload = {"organization": str(organization.pk)}
    if scope:
        payload["scope"] = scope
    if end_user is not None:
        payload["end_user"] = str(end_user.pk)
    key = f"{COMPILE_TOPICS}:{organization.pk}:{scope or '*'}:{end_user.pk if end_user is not None else '*'}"
    return enqueue(COMPILE_TOPICS, payload, organization=organization, scope=scope, client=client, idempotency_key=key)


def page_recompile_enqueue(*, profile: Profile) -> MemoryTask:
    """Recompiles a page of either kind: a person's page alone, a topic page with its owner's topics."""
    if profile.kind == Profile.Kind.TOPIC:
        return topics_compile_request(organization=profile.organization, scope=profile.scope, end_user=profile.end_user)
    return profile_compile_enqueue(entity_id=profile.entity_id, organization=profile.organization, scope=profile.scope)


@transaction.atomic
def profile_delete(*, profile: Profile) -> None:
    """The page with its revisions, sources and findings. Its entity stays: new mentions compile a new page."""
    profile.delete()


@transaction.atomic
def entity_delete(*, entity: Entity) -> None:
    """The entity with its mentions, edges and page; the owner's other entities keep their own."""
    entity.delete()
