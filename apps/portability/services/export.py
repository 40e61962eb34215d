"""Exports: what a selection (an organisation, a scope, an end user, a client) holds, streamed into an archive.
A subject's archive is exactly what erasing them would delete, and carries no one else's words (_Quotes)."""

from dataclasses import dataclass
from functools import reduce
from itertools import islice
from operator import or_
from pathlib import Path

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.conversations.models import Session
from apps.core.validation import is_uuid
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.portability import kinds as k
from apps.portability.archive import FORMAT, FORMAT_VERSION, ArchiveWriter, platform_version, vector_encode
from apps.privacy.services.subjects import CLIENT, USER, Subject
from apps.profiles.models import Edge, ItemType, LintFinding, Mention, ProfileRevision, ProfileSource
from apps.providers.embeddings import embedding_model_name
from apps.providers.models import LLMUsage
from apps.skills.models import Skill, SkillVersion
from apps.tenancy.models import Client, ClientAPIKey, EndUser, Organization

ORGANIZATION, SCOPE = "organization", "scope"
# The kinds whose owners' end_users rows an archive carries.
OWNED_KINDS = (
    k.SESSIONS,
    k.MESSAGES,
    k.CHECKPOINTS,
    k.CHECKPOINT_WRITES,
    k.EXPERIENCES,
    k.SKILLS,
    k.SKILL_USES,
    k.SKILL_FEEDBACK,
    k.SKILLS_WITHHELD,
    k.EPISODIC,
    k.SEMANTIC,
    k.ENTITIES,
)


@dataclass(frozen=True)
class Selection:
    """`subject` is set for an end user or a client (their erasure's definition)."""

    organization: Organization
    kind: str = ORGANIZATION
    scope: str = ""
    subject: Subject | None = None

    def describe(self) -> dict:
        described = {"kind": self.kind, "organization": self.organization.name}
        if self.kind == SCOPE:
            described["scope"] = self.scope
        elif self.subject is not None:
            described["user_id" if self.kind == USER else "client_id"] = self.subject.subject_id
        return described

    def querysets(self) -> dict[k.Kind, QuerySet]:
        rows = self._subject_rows() if self.subject is not None else self._organization_rows()
        owners = dict.fromkeys(OWNED_KINDS, "end_user_id")
        rows[k.END_USERS] = EndUser.objects.filter(organization=self.organization).filter(_referenced(rows, owners))
        # Every reference to a client: whoever wrote a row travels with it.
        writers = _referenced(
            rows,
            {kind: column for kind in rows for column, (model, _) in kind.parents.items() if model is Client},
        )
        if self.kind == CLIENT and self.subject.client is not None:
            writers |= Q(pk=self.subject.client.pk)
        rows[k.CLIENTS] = Client.objects.filter(organization=self.organization).filter(writers)
        return {kind: rows[kind] for kind in k.KINDS if kind in rows}

    def _organization_rows(self) -> dict:
        owned = {"organization": self.organization, **({"scope": self.scope} if self.kind == SCOPE else {})}
        rows = {kind: kind.model.objects.filter(**owned) for kind in (*OWNED_KINDS, k.PROFILES, k.TOPIC_STATES)}
        # The other rows go with the row they belong to (an edge with its source).
        for kind, field, parent in (
            (k.SKILL_VERSIONS, "skill", k.SKILLS),
            (k.SKILL_LINEAGE, "skillversion", k.SKILL_VERSIONS),
            (k.EPISODIC_CHANGES, "memory", k.EPISODIC),
            (k.SEMANTIC_CHANGES, "memory", k.SEMANTIC),
            (k.MENTIONS, "entity", k.ENTITIES),
            (k.EDGES, "source", k.ENTITIES),
            (k.PROFILE_SOURCES, "profile", k.PROFILES),
            (k.PROFILE_REVISIONS, "profile", k.PROFILES),
            (k.LINT_FINDINGS, "profile", k.PROFILES),
        ):
            rows[kind] = kind.model.objects.filter(**{f"{field}__in": rows[parent]})
        return rows

    def _subject_rows(self) -> dict:
        subject = self.subject
        messages = subject.messages()
        named_versions = subject.named_skill_versions()
        skills = Skill.objects.filter(
            Q(pk__in=subject.own_skills().values("pk")) | Q(pk__in=named_versions.values("skill_id"))
        )
        entities, profiles = subject.entities(), subject.profiles()
        memories = dict(subject.memory_querysets())  # keyed by model label: the memories and their history
        tasks = subject.tasks()
        return {
            # The sessions a client wrote turns into, besides those it opened: a turn needs its session.
            k.SESSIONS: Session.objects.filter(
                Q(pk__in=subject.sessions().values("pk")) | Q(pk__in=messages.values("session_id"))
            ),
            k.MESSAGES: messages,
            k.CHECKPOINTS: subject.checkpoints(),
            k.CHECKPOINT_WRITES: subject.checkpoint_writes(),
            k.EXPERIENCES: subject.experiences(),
            k.SKILLS: skills,
            k.SKILL_VERSIONS: SkillVersion.objects.filter(Q(skill__in=skills) | Q(pk__in=named_versions.values("pk"))),
            k.SKILL_LINEAGE: subject.lineage_links(),
            k.SKILL_USES: subject.skill_uses(),
            k.SKILL_FEEDBACK: subject.skill_feedback(),
            k.SKILLS_WITHHELD: subject.skills_withheld(),
            k.EPISODIC: memories[EpisodicMemory._meta.label],
            k.EPISODIC_CHANGES: memories[EpisodicMemoryChange._meta.label],
            k.SEMANTIC: memories[SemanticMemory._meta.label],
            k.SEMANTIC_CHANGES: memories[SemanticMemoryChange._meta.label],
            k.ENTITIES: entities,
            k.MENTIONS: Mention.objects.filter(Q(entity__in=entities) | Q(pk__in=subject.mentions().values("pk"))),
            k.EDGES: Edge.objects.filter(source__in=entities),
            k.PROFILES: profiles,
            k.PROFILE_SOURCES: ProfileSource.objects.filter(
                Q(profile__in=profiles) | Q(pk__in=subject.profile_sources().values("pk"))
            ),
            k.PROFILE_REVISIONS: ProfileRevision.objects.filter(
                Q(profile__in=profiles) | Q(pk__in=subject.quoting_revisions().values("pk"))
            ),
            k.LINT_FINDINGS: LintFinding.objects.filter(profile__in=profiles),
            k.TOPIC_STATES: subject.topic_states(),
            k.INGEST_REQUESTS: subject.ingest_requests(),
            k.API_KEYS: ClientAPIKey.objects.filter(client=subject.client)
            if subject.client
            else ClientAPIKey.objects.none(),
            k.TASKS: tasks,
            k.LLM_USAGE: LLMUsage.objects.filter(task_id__in=tasks.values("pk")),
        }


QUOTED_KINDS = {ItemType.MESSAGE: k.MESSAGES, ItemType.EPISODIC: k.EPISODIC, ItemType.SEMANTIC: k.SEMANTIC}


@dataclass(frozen=True)
class _Quotes:
    """A subject's profile rows may quote another person's items: a quote travels only with the item it quotes,
    and a revision of a page that is not the subject's carries no text."""

    items: dict[str, QuerySet]  # item type -> the archive's items of that type
    pages: QuerySet  # the archive's profiles: the subject's own pages

    @classmethod
    def of(cls, querysets: dict) -> "_Quotes":
        return cls(
            items={item_type: querysets[kind] for item_type, kind in QUOTED_KINDS.items()},
            pages=querysets[k.PROFILES],
        )

    def redacted(self, kind: k.Kind, rows, batch_size: int):
        if kind not in (k.PROFILE_SOURCES, k.PROFILE_REVISIONS):
            yield from rows
            return
        rows = iter(rows)
        while batch := list(islice(rows, batch_size)):
            cited = [(row["item_type"], row["item_id"]) for row in batch] if kind is k.PROFILE_SOURCES else []
            for row in batch if kind is k.PROFILE_REVISIONS else ():
                cited += [_citation(source) for source in row["sources"] or () if isinstance(source, dict)]
            kept = self._archived(cited)
            if kind is k.PROFILE_SOURCES:
                for row in batch:
                    if (row["item_type"], str(row["item_id"])) not in kept:
                        row["quote"] = ""
                    yield row
                continue
            own = {
                str(pk)
                for pk in self.pages.filter(pk__in={row["profile_id"] for row in batch}).values_list("pk", flat=True)
            }
            for row in batch:
                if str(row["profile_id"]) not in own:
                    row["markdown"] = ""
                if isinstance(row["sources"], list):
                    row["sources"] = [
                        {key: value for key, value in source.items() if key != "quote"}
                        if isinstance(source, dict) and _citation(source) not in kept
                        else source
                        for source in row["sources"]
                    ]
                yield row

    def _archived(self, cited: list[tuple]) -> set[tuple[str, str]]:
        kept = set()
        for item_type, items in self.items.items():
            ids = {item_id for cited_type, item_id in cited if cited_type == item_type and is_uuid(item_id)}
            if ids:
                kept.update((item_type, str(pk)) for pk in items.filter(pk__in=ids).values_list("pk", flat=True))
        return kept


def _citation(source: dict) -> tuple:
    return source.get("item_type"), str(source.get("item_id"))


def _referenced(rows: dict, references: dict) -> Q:
    return reduce(or_, (Q(pk__in=rows[kind].values(column)) for kind, column in references.items()), Q(pk__in=[]))


def _rows(kind: k.Kind, queryset: QuerySet, batch_size: int, on_row, quotes: _Quotes | None):
    vectors = "embedding" in kind.columns
    rows = queryset.order_by().values(*kind.columns).iterator(chunk_size=batch_size)
    if quotes is not None:
        rows = quotes.redacted(kind, rows, batch_size)
    for row in rows:
        on_row(row)
        if vectors and row["embedding"] is not None:
            row["embedding"] = vector_encode(row["embedding"])
        yield row


def archive_export(
    *, selection: Selection, path: Path, on_progress=None, on_row=None, database: str = DEFAULT_DB_ALIAS
) -> dict:
    """Returns the manifest; `on_progress(kind_name, done, total)` every batch, `on_row(kind, row)` every row."""
    batch_size = settings.PORTABILITY_BATCH_SIZE
    writer = ArchiveWriter(path)
    querysets = {kind: queryset.using(database) for kind, queryset in selection.querysets().items()}
    quotes = _Quotes.of(querysets) if selection.subject is not None else None
    try:
        for kind, queryset in querysets.items():
            total = queryset.count() if on_progress else 0
            done = 0

            def tick(row, kind=kind, total=total):
                nonlocal done
                done += 1
                if on_row is not None:
                    on_row(kind, row)
                if on_progress and done % batch_size == 0:
                    on_progress(kind.name, done, total)

            writer.write_rows(kind.file, _rows(kind, queryset, batch_size, tick, quotes))
            if on_progress:
                on_progress(kind.name, done, total)
    except BaseException:
        writer.abort()
        Path(path).unlink(missing_ok=True)
        raise
    return writer.close(
        {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "platform_version": platform_version(),
            "created_at": timezone.now().isoformat(),
            "selection": selection.describe(),
            "embedding_model": embedding_model_name(),
            "embedding_dimensions": settings.EMBEDDING_DIMENSIONS,
        }
    )
