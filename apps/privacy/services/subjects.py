"""Who an erasure is about, and every queryset of the rows that hold that subject's data.
Purge, verification and the admin's preview all read these, so what is erased and what is checked cannot drift."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from apps.conversations.models import IngestRequest, Message, Session
from apps.pipeline.models import MemoryTask
from apps.privacy.services.provenance import MEMORY_MODELS, Derived
from apps.profiles.models import Entity, Mention, Profile, ProfileRevision, ProfileSource, TopicState
from apps.skills.models import Skill, SkillExperience, SkillFeedback, SkillUse, SkillVersion, SkillWithheld
from apps.tenancy.models import Client, ClientAPIKey, EndUser, Organization

USER = "user"
CLIENT = "client"
# Payload keys of pipeline tasks that hold the id of a row of these models.
TASK_REFERENCES = {"session": Session, "entity": Entity, "end_user": EndUser}


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

    def _rows(self, model, *, user: str | None = None, client: str | None = None) -> QuerySet:
        if self.end_user is not None and user is not None:
            return model.objects.filter(**{user: self.end_user})
        if self.client is not None and client is not None:
            return model.objects.filter(**{client: self.client})
        return model.objects.none()

    def sessions(self) -> QuerySet:
        """A client's are those it opened; by the end of its erasure those holding others' turns have passed on."""
        return self._rows(Session, user="end_user", client="client")

    def own_sessions(self) -> QuerySet:
        """Holding no one else's turn: they, and the tasks naming them, go."""
        if self.client is not None:
            shared = Message.objects.filter(session__client=self.client).exclude(created_by=self.client)
            return self.sessions().exclude(pk__in=shared.values("session_id"))
        return self.sessions()

    def messages(self) -> QuerySet:
        """A client's are those it wrote, never another client's turns in a session it opened."""
        return self._rows(Message, user="end_user", client="created_by")

    def ingest_requests(self) -> QuerySet:
        if self.kind == USER:
            # The stored responses name the user; the EndUser row may already be gone.
            return IngestRequest.objects.filter(
                client__organization=self.organization, response__user_id=self.subject_id
            )
        return self._rows(IngestRequest, client="client")

    def derived(self) -> Derived:
        """With a user's own experiences and memories, and the memories a client stored directly."""
        extra = {}
        if self.end_user is not None:
            extra = {
                "extra_experiences": SkillExperience.objects.filter(end_user=self.end_user),
                "extra_memories": {model: model.objects.filter(end_user=self.end_user) for model, _ in MEMORY_MODELS},
            }
        elif self.client is not None:
            extra["extra_memories"] = {
                model: model.objects.filter(created_by=self.client, source_message_ids=[]) for model, _ in MEMORY_MODELS
            }
        return Derived(organization_id=self.organization.pk, turns=self.messages(), **extra)

    def experiences(self) -> QuerySet:
        if not self.exists:
            return SkillExperience.objects.none()
        return self.derived().experiences()

    def own_skills(self) -> QuerySet:
        return self._rows(Skill, user="end_user")

    def named_skill_versions(self) -> QuerySet:
        """User-specific skills record `end_user` in their snapshots."""
        if self.kind != USER:
            return SkillVersion.objects.none()
        return SkillVersion.objects.filter(skill__organization=self.organization, snapshot__end_user=self.subject_id)

    def skill_uses(self) -> QuerySet:
        return self._rows(SkillUse, user="end_user", client="client")

    def skill_feedback(self) -> QuerySet:
        return self._rows(SkillFeedback, user="end_user", client="client")

    def skills_withheld(self) -> QuerySet:
        """The records of the skills a user asked for and was not served (no client wrote them)."""
        return self._rows(SkillWithheld, user="end_user")

    def lineage_links(self) -> QuerySet:
        return SkillVersion.experiences.through.objects.filter(skillexperience__in=self.experiences().values("pk"))

    def memory_querysets(self) -> list[tuple[str, QuerySet]]:
        if not self.exists:
            return [(label, queryset.none()) for label, queryset in self.derived().memory_querysets()]
        return self.derived().memory_querysets()

    def entities(self) -> QuerySet:
        """With their mentions, edges, profiles, revisions and findings (cascade)."""
        return self._rows(Entity, user="end_user")

    def profiles(self) -> QuerySet:
        return self._rows(Profile, user="end_user")

    def topic_states(self) -> QuerySet:
        return self._rows(TopicState, user="end_user")

    def mentions(self) -> QuerySet:
        return self.derived().mentions() if self.exists else Mention.objects.none()

    def profile_sources(self) -> QuerySet:
        return self.derived().profile_sources() if self.exists else ProfileSource.objects.none()

    def quoting_revisions(self) -> QuerySet:
        return self.derived().quoting_revisions() if self.exists else ProfileRevision.objects.none()

    def referenced_ids_sql(self) -> tuple[str, list]:
        sql, params = self.own_sessions().values("pk").query.sql_with_params()
        sql, params = f"SELECT s.id::text FROM ({sql}) AS s(id)", list(params)
        if self.end_user is not None:  # a client's own rows hold no entities (an empty queryset has no SQL)
            entities, entity_params = self.entities().values("pk").query.sql_with_params()
            sql, params = f"{sql} UNION ALL SELECT e.id::text FROM ({entities}) AS e(id)", [*params, *entity_params]
            sql, params = f"{sql} UNION ALL SELECT %s::text", [*params, str(self.end_user.pk)]
        return sql, params

    def tasks(self) -> QuerySet:
        if not self.exists:
            return MemoryTask.objects.none()
        ids_sql, params = self.referenced_ids_sql()
        return MemoryTask.objects.filter(
            organization=self.organization,
            pk__in=RawSQL(
                f"SELECT t.id FROM {MemoryTask._meta.db_table} t WHERE t.organization_id = %s "
                f"AND EXISTS (SELECT 1 FROM jsonb_each_text(t.payload) kv WHERE kv.key = ANY(%s) AND kv.value IN ({ids_sql}))",
                [self.organization.pk, list(TASK_REFERENCES), *params],
            ),
        )

    def orphaned_tasks(self) -> QuerySet:
        """Naming a row that no longer exists (an erased one)."""
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
        return self._rows(ClientAPIKey, client="client").filter(revoked_at__isnull=True)

    def active_client(self) -> QuerySet:
        if self.client is None:
            return Client.objects.none()
        return Client.objects.filter(pk=self.client.pk, status=Client.Status.ACTIVE)

    def end_users(self) -> QuerySet:
        if self.kind != USER:
            return EndUser.objects.none()
        return EndUser.objects.filter(organization=self.organization, user_id=self.subject_id)


def subject_resolve(*, organization: Organization, kind: str, subject_id: str) -> Subject:
    """A subject already erased resolves with no rows behind it."""
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
