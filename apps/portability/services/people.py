"""Who an export's archive holds rows of, recorded as it is written, so that erasing any of them deletes it:
its end_users and clients, and the owners and writers of every item its profile rows quote."""

from django.conf import settings

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.portability import kinds as k
from apps.portability.models import ExportPerson
from apps.profiles.models import ItemType

QUOTED_MODELS = {ItemType.MESSAGE: Message, ItemType.EPISODIC: EpisodicMemory, ItemType.SEMANTIC: SemanticMemory}


def _quoted(kind: k.Kind, row: dict) -> list[tuple[str, str]]:
    if kind is k.PROFILE_SOURCES:
        return [(row["item_type"], str(row["item_id"]))]
    refs = row.get("sources") if kind is k.PROFILE_REVISIONS else row.get("source_refs")
    return [(ref["item_type"], str(ref["item_id"])) for ref in refs or () if isinstance(ref, dict) and "item_id" in ref]


class PeopleRecorder:
    """`see(kind, row)` for every row written, `flush()` at the end; holds at most a batch of each."""

    def __init__(self, export):
        self.export = export
        self.people: set[tuple[str, str]] = set()
        self.quoted: dict[str, set[str]] = {item_type: set() for item_type in QUOTED_MODELS}

    def see(self, kind: k.Kind, row: dict) -> None:
        if kind is k.END_USERS:
            self._add(ExportPerson.Kind.USER, row["user_id"])
        elif kind is k.CLIENTS:
            self._add(ExportPerson.Kind.CLIENT, str(row["id"]))
        elif kind in (k.PROFILES, k.PROFILE_SOURCES, k.PROFILE_REVISIONS):
            for item_type, item_id in _quoted(kind, row):
                if item_type in self.quoted:
                    self.quoted[item_type].add(item_id)
            if sum(len(ids) for ids in self.quoted.values()) >= settings.PORTABILITY_BATCH_SIZE:
                self._resolve_quoted()

    def flush(self) -> None:
        self._resolve_quoted()
        self._write()

    def _add(self, kind: str, subject_id: str) -> None:
        self.people.add((kind, subject_id))
        if len(self.people) >= settings.PORTABILITY_BATCH_SIZE:
            self._write()

    def _resolve_quoted(self) -> None:
        for item_type, ids in self.quoted.items():
            if not ids:
                continue
            owners = (
                QUOTED_MODELS[item_type]
                .objects.filter(organization_id=self.export.organization_id, pk__in=list(ids))
                .values_list("end_user__user_id", "created_by_id")
            )
            for user_id, client_id in owners.iterator(chunk_size=settings.PORTABILITY_BATCH_SIZE):
                self._add(ExportPerson.Kind.USER, user_id)
                if client_id is not None:
                    self._add(ExportPerson.Kind.CLIENT, str(client_id))
            ids.clear()

    def _write(self) -> None:
        ExportPerson.objects.bulk_create(
            [ExportPerson(export=self.export, kind=kind, subject_id=subject_id) for kind, subject_id in self.people],
            ignore_conflicts=True,
        )
        self.people.clear()
