"""Provenance: what the platform derived from which turns (`Derived`), and the steps that remove it when the
turns are gone. The cascade (cascade.py), turn and session deletion and erasure's purge are built from these
steps; retention runs only the last two."""

import re
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from apps.conversations.models import Message, Session, SessionTag
from apps.conversations.routing import extraction_enqueue
from apps.conversations.services.deletion import messages_delete
from apps.conversations.services.learning import messages_mark_unlearned
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.memories.services.memories import memory_merge_group
from apps.pipeline.locks import WorkOf, advisory_locks, work_lock_keys
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import tasks_cancel
from apps.privacy.services.skills import skills_release
from apps.profiles.models import Entity, Mention, Profile, ProfileRevision, ProfileSource
from apps.profiles.services.compile import profiles_clear_for_recompile
from apps.profiles.services.entities import owner_edges_recompute
from apps.search.models import StagedEmbedding
from apps.skills.models import SkillExperience
from apps.skills.services.evolve.run import EVOLVE_SKILLS

MEMORY_MODELS = ((EpisodicMemory, EpisodicMemoryChange), (SemanticMemory, SemanticMemoryChange))
ERASED = "[erased]"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Derived:
    """Everything derived from `turns`, as querysets; an erasure adds its subject's own rows (`extra_*`)."""

    organization_id: object
    turns: QuerySet
    extra_experiences: QuerySet | None = None
    extra_memories: dict = field(default_factory=dict)

    def turn_ids(self) -> QuerySet:
        return self.turns.values("pk")

    def session_ids(self) -> QuerySet:
        return self.turns.order_by().values("session_id").distinct()

    def _citing_turns(self, model) -> Q:
        # The turns' ids are hashed once, not built into an array compared with every row.
        turns_sql, params = _sql(self.turn_ids())
        table = model._meta.db_table
        return Q(
            pk__in=RawSQL(
                f"SELECT r.id FROM {table} r WHERE r.organization_id = %s AND EXISTS "
                f"(SELECT 1 FROM unnest(r.source_message_ids) AS s(id) WHERE s.id IN ({turns_sql}))",
                [self.organization_id, *params],
            )
        )

    def experiences(self) -> QuerySet:
        derived = Q(session__in=self.session_ids()) | self._citing_turns(SkillExperience)
        if self.extra_experiences is not None:
            derived |= Q(pk__in=self.extra_experiences.values("pk"))
        return SkillExperience.objects.filter(derived, organization_id=self.organization_id)

    def memories(self, model) -> QuerySet:
        """Soft-deleted ones included."""
        derived = self._citing_turns(model)
        if model in self.extra_memories:
            derived |= Q(pk__in=self.extra_memories[model].values("pk"))
        return model.objects.filter(derived, organization_id=self.organization_id)

    def memory_querysets(self) -> list[tuple[str, QuerySet]]:
        """(label, queryset), each type's history rows before the memories."""
        result = []
        for memory_model, change_model in MEMORY_MODELS:
            memories = self.memories(memory_model)
            result.append((change_model._meta.label, change_model.objects.filter(memory__in=memories.values("pk"))))
            result.append((memory_model._meta.label, memories))
        return result

    def item_ids_sql(self) -> tuple[str, list]:
        parts, params = [], []
        for queryset in (self.turn_ids(), *(self.memories(model).values("pk") for model, _ in MEMORY_MODELS)):
            sql, query_params = _sql(queryset)
            parts.append(sql)
            params += query_params
        return " UNION ALL ".join(f"({part})" for part in parts), params

    def mentions(self) -> QuerySet:
        return Mention.objects.filter(item_id__in=RawSQL(*self.item_ids_sql()))

    def profile_sources(self) -> QuerySet:
        return ProfileSource.objects.filter(item_id__in=RawSQL(*self.item_ids_sql()))

    def quoting_revisions(self) -> QuerySet:
        sql, params = self.item_ids_sql()
        return ProfileRevision.objects.filter(
            pk__in=RawSQL(
                f"SELECT r.id FROM {ProfileRevision._meta.db_table} r, jsonb_array_elements(r.sources) AS source "
                f"WHERE (source->>'item_id')::uuid IN ({sql})",
                params,
            )
        )

    def task_results(self) -> QuerySet:
        """Finished tasks on their sessions, and evolution runs of their experiences' scopes (results name skills)."""
        sessions_sql, params = _sql(self.session_ids())
        scopes = list(self.experiences().order_by().values_list("scope", flat=True).distinct())
        return (
            MemoryTask.objects.filter(organization_id=self.organization_id, result__isnull=False)
            .exclude(status__in=MemoryTask.ACTIVE_STATUSES)
            .filter(
                Q(
                    pk__in=RawSQL(
                        f"SELECT t.id FROM {MemoryTask._meta.db_table} t WHERE t.organization_id = %s "
                        f"AND t.payload->>'session' IN (SELECT s.session_id::text FROM ({sessions_sql}) AS s(session_id))",
                        [self.organization_id, *params],
                    )
                )
                | Q(task_type=EVOLVE_SKILLS, payload__scope__in=scopes)
            )
        )

    def staged_embeddings(self) -> QuerySet:
        return StagedEmbedding.objects.filter(
            Q(item_id__in=RawSQL(*self.item_ids_sql())) | Q(item_id__in=self.experiences().values("pk"))
        )


def _sql(queryset) -> tuple[str, list]:
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:
        return "SELECT NULL::uuid WHERE FALSE", []
    return sql, list(params)


def batches(queryset):
    """Selected again each time: what is done drops out."""
    batch_size = settings.ERASURE_BATCH_SIZE
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:batch_size])
        if ids:
            yield ids
        if len(ids) < batch_size:
            return


def delete_in_batches(queryset) -> int:
    """Each batch its own short transaction; returns how many rows of its model went."""
    model, label, total = queryset.model, queryset.model._meta.label, 0
    for ids in batches(queryset):
        with transaction.atomic():
            _, per_model = model.objects.filter(pk__in=ids).delete()
        total += per_model.get(label, 0)
    return total


def strings_mapped(value, change):
    """A JSON value with `change(text)` for each of its strings (not its keys)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: strings_mapped(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [strings_mapped(item, change) for item in value]
    return value


def forget_skills(derived: Derived, *, actor: str, own_skills: QuerySet | None = None) -> dict:
    """Skills before experiences: what happens to a skill depends on which of its sources are left."""
    counts = skills_release(experiences=derived.experiences(), own_skills=own_skills, actor=actor)
    counts["skills.SkillExperience"] = delete_in_batches(derived.experiences())
    return counts


def forget_compiled(derived: Derived, *, reason: str, entities: QuerySet | None = None) -> dict:
    """Before the items it cites are gone. `entities` (a user's own) go whole."""
    counts = Counter({"profiles.Entity": delete_in_batches(entities) if entities is not None else 0})
    touched = set(derived.mentions().values_list("entity_id", flat=True).distinct())
    counts["profiles.Mention"] = delete_in_batches(derived.mentions())
    counts["profiles.ProfileRevision"] = delete_in_batches(derived.quoting_revisions())
    affected = set(derived.profile_sources().values_list("profile_id", flat=True).distinct())
    counts["profiles.ProfileSource"] = delete_in_batches(derived.profile_sources())
    # An entity no item mentions any more was named only by what went: its name and page go too.
    bare = Entity.objects.filter(pk__in=touched).exclude(pk__in=Mention.objects.values("entity_id"))
    owners = set(Entity.objects.filter(pk__in=touched).values_list("organization_id", "scope", "end_user_id"))
    counts["profiles.Entity"] += delete_in_batches(bare)
    for organization_id, scope, end_user_id in owners:
        owner_edges_recompute(organization_id=organization_id, scope=scope, end_user_id=end_user_id)
    # Person pages whose entity went are gone with it; topic pages (no entity) and the rest are cleared.
    kept = Profile.objects.filter(pk__in=affected).values_list("pk", flat=True)
    counts["profiles.Profile (cleared, recompiling)"] = profiles_clear_for_recompile(
        profile_ids=list(kept), reason=reason
    )
    return dict(counts)


def forget_memories(derived: Derived) -> dict:
    """Memories and their history go; the other turns they cited are learned from again."""
    cited = set()
    for model, _ in MEMORY_MODELS:
        for sources in derived.memories(model).values_list("source_message_ids", flat=True):
            cited.update(sources)
    counts = {label: delete_in_batches(queryset) for label, queryset in derived.memory_querysets()}
    session_ids = messages_mark_unlearned(turns=Message.objects.filter(pk__in=cited).exclude(pk__in=derived.turn_ids()))
    for session in Session.objects.filter(pk__in=session_ids, session_tag=SessionTag.CONVERSATION).select_related(
        "organization"
    ):
        extraction_enqueue(session)
    counts["conversations.Session (learned again)"] = len(session_ids)
    return counts


def scrub_task_results(derived: Derived) -> dict:
    count = 0
    for task in derived.task_results().only("pk", "result"):
        result = strings_mapped(task.result, lambda text: text if _UUID.match(text) else ERASED)
        if result != task.result:
            MemoryTask.objects.filter(pk=task.pk).update(result=result, updated_at=timezone.now())
            count += 1
    return {"pipeline.MemoryTask.result (scrubbed)": count}


def forget_staged_embeddings(derived: Derived) -> dict:
    return {"search.StagedEmbedding": delete_in_batches(derived.staged_embeddings())}


def delete_turns(turns: QuerySet) -> dict:
    counts = Counter()
    # A batch in session order touches few sessions: few locks, few neighbours to recompute.
    for ids in batches(turns.order_by("session_id", "seq")):
        result = messages_delete(message_ids=ids)
        counts["conversations.Message"] += result.get("deleted", 0)
        counts["conversations.Message.context (recomputed)"] += result.get("contexts", 0)
    return dict(counts)


def _summed(*steps: dict) -> dict:
    counts = Counter()
    for step in steps:
        counts.update(step)
    return dict(counts)


def turns_forget(*, turns: QuerySet, organization_id, actor: str) -> dict:
    derived = Derived(organization_id=organization_id, turns=turns)
    return _summed(
        forget_skills(derived, actor=actor),
        forget_compiled(derived, reason=f"Sources deleted ({actor}); the page is being recompiled."),
        forget_memories(derived),
        scrub_task_results(derived),
        forget_staged_embeddings(derived),
        delete_turns(turns),
    )


def turn_delete(*, message: Message, actor: str = "api:delete") -> dict:
    """Under the owner's work locks, so no learning from the turn stores what it read while it goes."""
    owner = WorkOf(
        organization_id=message.organization_id, end_user_ids=(message.end_user_id,), scopes=(message.scope,)
    )
    with advisory_locks(work_lock_keys(owner), timeout=settings.DELETE_WAIT_SECONDS):
        return turns_forget(
            turns=Message.objects.filter(pk=message.pk), organization_id=message.organization_id, actor=actor
        )


def memory_forget(*, memory, actor: str) -> dict:
    """The memory and every one merged with it (a survivor's details hold its duplicates'), under the owner's
    work locks. Its source turns are not learned from again: the caller wants it gone, not recomputed."""
    group = memory_merge_group(memory)
    derived = Derived(
        organization_id=memory.organization_id,
        turns=Message.objects.none(),
        extra_memories={
            model: model.objects.filter(pk__in=[item.pk for item in group if isinstance(item, model)])
            for model, _ in MEMORY_MODELS
        },
    )
    return _summed(
        forget_compiled(derived, reason=f"A memory this page quoted was deleted ({actor}); it is being recompiled."),
        forget_staged_embeddings(derived),
        {label: delete_in_batches(queryset) for label, queryset in derived.memory_querysets()},
    )


def session_delete(*, session: Session, actor: str = "api:delete") -> dict:
    counts = Counter(
        turns_forget(
            turns=Message.objects.filter(session=session), organization_id=session.organization_id, actor=actor
        )
    )
    waiting = MemoryTask.objects.filter(
        organization_id=session.organization_id,
        payload__session=str(session.pk),
        status__in=MemoryTask.CLAIMABLE_STATUSES,
    )
    counts["pipeline.MemoryTask (cancelled)"] += tasks_cancel(queryset=waiting)
    counts["conversations.Session"] += Session.objects.filter(pk=session.pk).delete()[1].get(Session._meta.label, 0)
    return dict(counts)
