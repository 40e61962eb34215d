"""Who an erasure is about, and every queryset of the rows that hold that subject's data.

Purge, verification and the admin's preview all read these querysets, so "what is erased"
and "what is checked afterwards" cannot drift apart.
"""

from dataclasses import dataclass

from django.contrib.postgres.expressions import ArraySubquery
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from apps.conversations.models import IngestRequest, Message, Session
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Entity, Mention, Profile, ProfileRevision, ProfileSource
from apps.skills.models import Skill, SkillExperience, SkillVersion
from apps.tenancy.models import Client, ClientAPIKey, EndUser, Organization

USER = "user"
CLIENT = "client"
# Payload keys of pipeline tasks that hold the id of a row of these models.
TASK_REFERENCES = {"session": Session, "entity": Entity}
MEMORY_MODELS = ((EpisodicMemory, EpisodicMemoryChange), (SemanticMemory, SemanticMemoryChange))


@dataclass(frozen=True)
class Subject:
    organization: Organization
    kind: str
    subject_id: str
    end_user: EndUser | None = None
    client: Client | None = None

    @property
    def exists(self) -> bool:
        return self.end_user is not None or self.client is not None

    # Conversations ------------------------------------------------------------------------------

    def sessions(self) -> QuerySet:
        if self.end_user is not None:
            return Session.objects.filter(end_user=self.end_user)
        if self.client is not None:
            return Session.objects.filter(client=self.client)
        return Session.objects.none()

    def messages(self) -> QuerySet:
        if self.end_user is not None:
            return Message.objects.filter(end_user=self.end_user)
        if self.client is not None:
            # What the client wrote, and every turn of the sessions it opened.
            return Message.objects.filter(Q(created_by=self.client) | Q(session__client=self.client))
        return Message.objects.none()

    def ingest_requests(self) -> QuerySet:
        if self.kind == USER:
            # The stored responses name the user; the EndUser row may already be gone.
            return IngestRequest.objects.filter(
                client__organization=self.organization, response__user_id=self.subject_id
            )
        if self.client is not None:
            return IngestRequest.objects.filter(client=self.client)
        return IngestRequest.objects.none()

    # Skills -------------------------------------------------------------------------------------

    def experiences(self) -> QuerySet:
        if self.end_user is not None:
            return SkillExperience.objects.filter(end_user=self.end_user)
        if self.client is not None:
            return SkillExperience.objects.filter(Q(created_by=self.client) | Q(session__client=self.client))
        return SkillExperience.objects.none()

    def own_skills(self) -> QuerySet:
        """Skills that belong to the subject alone (user-specific skills)."""
        if self.end_user is not None:
            return Skill.objects.filter(end_user=self.end_user)
        return Skill.objects.none()

    def named_skill_versions(self) -> QuerySet:
        """Version snapshots that name the user (user-specific skills record `end_user` in them)."""
        if self.kind != USER:
            return SkillVersion.objects.none()
        return SkillVersion.objects.filter(skill__organization=self.organization, snapshot__end_user=self.subject_id)

    def lineage_links(self) -> QuerySet:
        return SkillVersion.experiences.through.objects.filter(skillexperience__in=self.experiences().values("pk"))

    # Memories ------------------------------------------------------------------------------------

    def memories(self, model) -> QuerySet:
        """The subject's episodic or semantic memories, soft-deleted ones included."""
        if self.end_user is not None:
            return model.objects.filter(end_user=self.end_user)
        if self.client is not None:
            # Memories name no creator: they are the client's when learned from a turn it wrote.
            return model.objects.filter(
                organization=self.organization, source_message_ids__overlap=ArraySubquery(self.messages().values("pk"))
            )
        return model.objects.none()

    def memory_querysets(self) -> list[tuple[str, QuerySet]]:
        """(table, queryset) of the subject's memories, each type's history rows before the memories."""
        result = []
        for memory_model, change_model in MEMORY_MODELS:
            memories = self.memories(memory_model)
            result.append((change_model._meta.label, change_model.objects.filter(memory__in=memories.values("pk"))))
            result.append((memory_model._meta.label, memories))
        return result

    # Compiled memory -----------------------------------------------------------------------------

    def entities(self) -> QuerySet:
        """A user's entities, with their mentions, edges, profiles, revisions and findings (cascade)."""
        if self.end_user is not None:
            return Entity.objects.filter(end_user=self.end_user)
        return Entity.objects.none()

    def profiles(self) -> QuerySet:
        if self.end_user is not None:
            return Profile.objects.filter(end_user=self.end_user)
        return Profile.objects.none()

    def item_ids_sql(self) -> tuple[str, list]:
        """SQL selecting the ids of the subject's turns and memories, which compiled memory cites."""
        parts, params = [], []
        for queryset in (self.messages(), *(self.memories(model) for model, _ in MEMORY_MODELS)):
            sql, query_params = queryset.values("pk").query.sql_with_params()
            parts.append(sql)
            params += query_params
        return " UNION ALL ".join(f"({part})" for part in parts), params

    def _citing(self, model, column: str = "item_id") -> QuerySet:
        if not self.exists:
            return model.objects.none()
        sql, params = self.item_ids_sql()
        return model.objects.filter(**{f"{column}__in": RawSQL(sql, params)})

    def mentions(self) -> QuerySet:
        """Mentions of the subject's items (a user's own entities go with them in any case)."""
        return self._citing(Mention)

    def profile_sources(self) -> QuerySet:
        return self._citing(ProfileSource)

    def quoting_revisions(self) -> QuerySet:
        """Profile revisions that quote one of the subject's items."""
        if not self.exists:
            return ProfileRevision.objects.none()
        sql, params = self.item_ids_sql()
        return ProfileRevision.objects.filter(pk__in=RawSQL(
            f"SELECT r.id FROM {ProfileRevision._meta.db_table} r, jsonb_array_elements(r.sources) AS source "
            f"WHERE (source->>'item_id')::uuid IN ({sql})",
            params,
        ))

    # Pipeline and access ------------------------------------------------------------------------

    def referenced_ids_sql(self) -> tuple[str, list]:
        """SQL selecting, as text, the ids of the subject's rows that task payloads may name."""
        sql, params = self.sessions().values("pk").query.sql_with_params()
        sql, params = f"SELECT s.id::text FROM ({sql}) AS s(id)", list(params)
        if self.end_user is not None:  # a client's own rows hold no entities (an empty queryset has no SQL)
            entities, entity_params = self.entities().values("pk").query.sql_with_params()
            sql, params = f"{sql} UNION ALL SELECT e.id::text FROM ({entities}) AS e(id)", [*params, *entity_params]
        return sql, params

    def tasks(self) -> QuerySet:
        """Tasks whose payload names one of the subject's rows (e.g. their sessions)."""
        if not self.exists:
            return MemoryTask.objects.none()
        ids_sql, params = self.referenced_ids_sql()
        keys = list(TASK_REFERENCES)
        return MemoryTask.objects.filter(
            organization=self.organization,
            pk__in=RawSQL(
                f"SELECT t.id FROM {MemoryTask._meta.db_table} t WHERE t.organization_id = %s "
                f"AND EXISTS (SELECT 1 FROM jsonb_each_text(t.payload) kv WHERE kv.key = ANY(%s) AND kv.value IN ({ids_sql}))",
                [self.organization.pk, keys, *params],
            ),
        )

    def orphaned_tasks(self) -> QuerySet:
        """Tasks of the organisation whose payload names a row that no longer exists (an erased one)."""
        clauses = []
        for key, model in TASK_REFERENCES.items():
            table = model._meta.db_table
            clauses.append(
                f"(t.payload ? '{key}' AND NOT EXISTS (SELECT 1 FROM {table} r WHERE r.id = CASE WHEN t.payload->>'{key}' ~* "
                f"'^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$' THEN (t.payload->>'{key}')::uuid END))"
            )
        return MemoryTask.objects.filter(
            pk__in=RawSQL(
                f"SELECT t.id FROM {MemoryTask._meta.db_table} t WHERE t.organization_id = %s AND ({' OR '.join(clauses)})",
                [self.organization.pk],
            )
        )

    def active_api_keys(self) -> QuerySet:
        if self.client is None:
            return ClientAPIKey.objects.none()
        return ClientAPIKey.objects.filter(client=self.client, revoked_at__isnull=True)

    def active_client(self) -> QuerySet:
        if self.client is None:
            return Client.objects.none()
        return Client.objects.filter(pk=self.client.pk, status=Client.Status.ACTIVE)

    def end_users(self) -> QuerySet:
        if self.kind != USER:
            return EndUser.objects.none()
        return EndUser.objects.filter(organization=self.organization, user_id=self.subject_id)


def subject_resolve(*, organization: Organization, kind: str, subject_id: str) -> Subject:
    """The subject as it exists now; a subject already erased resolves with no rows behind it."""
    if kind == USER:
        end_user = EndUser.objects.filter(organization=organization, user_id=subject_id).first()
        return Subject(organization=organization, kind=kind, subject_id=subject_id, end_user=end_user)
    if kind == CLIENT:
        try:
            client = Client.objects.filter(organization=organization, pk=subject_id).first()
        except (ValidationError, ValueError):
            client = None
        return Subject(organization=organization, kind=kind, subject_id=subject_id, client=client)
    raise ValueError(f"Unknown subject kind {kind!r}")
