"""Import of an archive into an organisation: every row validated, every id remapped, all or nothing.

Ids are remapped deterministically (a UUID5 of the row's old id in the namespace of the target
organisation), so references anywhere (foreign keys, id arrays, ids inside JSON) move without a
lookup table, and importing the same archive twice finds every row already there and changes
nothing. End users and clients are matched by their natural keys (user id, client name).
Vectors are kept when they were computed by the configured embedding model and recomputed
otherwise.
"""

import logging
import re
import uuid
from contextlib import contextmanager

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.conversations.models import SESSION_ID_PATTERN
from apps.core.validation import InputError, check_json, check_text
from apps.portability import kinds as k
from apps.portability.archive import ArchiveError, ArchiveReader, vector_decode
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.search.registry import SOURCES
from apps.skills.models import SkillVersion
from apps.tenancy.models import SCOPE_PATTERN, Client, EndUser, Organization

logger = logging.getLogger(__name__)


class _Import:
    def __init__(self, *, reader: ArchiveReader, organization: Organization, on_progress=None):
        self.reader = reader
        self.organization = organization
        self.on_progress = on_progress
        self.namespace = organization.pk
        self.users: dict[str, uuid.UUID] = {}
        self.clients: dict[str, uuid.UUID] = {}
        self.model_name = embedding_model_name()
        self.dimensions = settings.EMBEDDING_DIMENSIONS
        self.embedding_text = {
            source.model: source.embedding_text for source in SOURCES.values() if source.embedding_text
        }
        self.counts: dict[str, int] = {}
        self.recomputed = 0
        self.batch_size = settings.PORTABILITY_BATCH_SIZE

    def remap(self, value) -> uuid.UUID:
        try:
            old = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except ValueError:
            raise InputError("", "Not a UUID.") from None
        return uuid.uuid5(self.namespace, str(old))

    # Rows --------------------------------------------------------------------------------------

    def run(self) -> dict:
        self._end_users()
        self._clients()
        for kind in k.KINDS:
            if kind in k.NATURAL or not kind.importable:
                continue
            batch = []
            for line, row in self.reader.rows(kind.file):
                batch.append((line, self._located(kind, line, self._instance, kind, row)))
                if len(batch) >= self.batch_size:
                    self._flush(kind, batch)
                    batch = []
            self._flush(kind, batch)
        return self.counts

    def _located(self, kind, line, function, *args):
        try:
            return function(*args)
        except InputError as exc:
            raise ArchiveError(f"{kind.file}:{line}" + (f": {exc.field}" if exc.field else ""), exc.message) from None
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items())) if hasattr(exc, "error_dict") else ("", exc.messages)
            raise ArchiveError(
                f"{kind.file}:{line}" + (f": {field}" if field not in ("", "__all__") else ""), " ".join(messages)
            ) from None

    def _checked_row(self, kind: k.Kind, row: dict) -> dict:
        columns = kind.columns
        unknown, missing = sorted(set(row) - set(columns)), [column for column in columns if column not in row]
        if unknown:
            raise InputError(unknown[0], "Unknown field for this kind of row.")
        if missing:
            raise InputError(missing[0], "Missing.")
        for column, value in row.items():
            if column != "embedding":
                check_json(value, field=column)
        return row

    def _natural_rows(self, kind, key: str):
        """Rows of end_users or clients, batch by batch, with their natural key checked."""
        batch = []
        for line, row in self.reader.rows(kind.file):
            row = self._located(kind, line, self._checked_row, kind, row)
            value = row[key]
            if not isinstance(value, str) or not value.strip() or len(value) > 200:
                raise ArchiveError(
                    f"{kind.file}:{line}: {key}", "Must be a non-empty string of at most 200 characters."
                )
            self._located(kind, line, self.remap, row["id"])
            batch.append((line, row))
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _end_users(self):
        for batch in self._natural_rows(k.END_USERS, "user_id"):
            wanted = {row["user_id"]: row for _, row in batch}
            existing = dict(
                EndUser.objects.filter(organization=self.organization, user_id__in=wanted).values_list("user_id", "pk")
            )
            EndUser.objects.bulk_create(
                [
                    EndUser(id=self.remap(row["id"]), organization=self.organization, user_id=user_id)
                    for user_id, row in wanted.items()
                    if user_id not in existing
                ],
                ignore_conflicts=True,
            )
            existing = dict(
                EndUser.objects.filter(organization=self.organization, user_id__in=wanted).values_list("user_id", "pk")
            )
            for _, row in batch:
                self.users[str(row["id"])] = existing[row["user_id"]]
            self._count(k.END_USERS, len(batch))

    def _clients(self):
        """Clients are matched by name; one the organisation lacks is created disabled, without keys
        or permissions: it names who wrote the rows, and an operator decides whether it may act."""
        for batch in self._natural_rows(k.CLIENTS, "name"):
            for line, row in batch:
                client = Client.objects.filter(organization=self.organization, name=row["name"]).first()
                if client is None:
                    client = self._located(k.CLIENTS, line, self._new_client, row)
                self.clients[str(row["id"])] = client.pk
            self._count(k.CLIENTS, len(batch))

    def _new_client(self, row) -> Client:
        write_scope = row["write_scope"]
        read_scopes = row["read_scopes"]
        if write_scope is not None and not (isinstance(write_scope, str) and re.fullmatch(SCOPE_PATTERN, write_scope)):
            raise InputError("write_scope", "Must be a scope name or null.")
        if not isinstance(read_scopes, list) or not all(
            isinstance(s, str) and re.fullmatch(SCOPE_PATTERN, s) for s in read_scopes
        ):
            raise InputError("read_scopes", "Must be a list of scope names.")
        return Client.objects.create(
            id=self.remap(row["id"]),
            organization=self.organization,
            name=row["name"],
            status=Client.Status.DISABLED,
            write_scope=write_scope,
            read_scopes=read_scopes,
        )

    def _reference(self, kind, column, value):
        model, mode = kind.parents[column]
        if value is None:
            if not kind.model._meta.get_field(column[:-3]).null:
                raise InputError(column, "Must not be null.")
            return None
        mapping = {EndUser: self.users, Client: self.clients}.get(model)
        if mapping is None:
            return self.remap(value)
        if str(value) in mapping:
            return mapping[str(value)]
        if mode == k.NULL:
            return None
        raise InputError(column, f"Names a row that is not in {'end_users' if model is EndUser else 'clients'}.jsonl.")

    def _instance(self, kind: k.Kind, row: dict):
        row = self._checked_row(kind, row)
        values, vector = {}, None
        for column in kind.columns:
            value = row[column]
            if column == "id":
                if kind.keeps_ids:
                    values["id"] = self._remapped(column, value)
            elif column in kind.parents:
                values[column] = self._reference(kind, column, value)
            elif column in kind.id_columns:
                values[column] = None if value is None else self._remapped(column, value)
            elif column in kind.id_arrays:
                if not isinstance(value, list):
                    raise InputError(column, "Must be a list of ids.")
                values[column] = [self._remapped(column, item) for item in value]
            elif column in kind.cleared:
                values[column] = None
            elif column in kind.end_user_arrays:
                if not isinstance(value, list):
                    raise InputError(column, "Must be a list of ids.")
                values[column] = [self.users[str(item)] for item in value if str(item) in self.users]
            elif column == "embedding":
                vector = value
            else:
                values[column] = value
        if kind.remap_json is not None:
            try:
                kind.remap_json(values, lambda value: str(self.remap(value)))
            except InputError as exc:
                raise InputError(exc.field or "ids", exc.message) from None
        self._check_names(values)
        if any(f.name == "organization" for f in kind.model._meta.concrete_fields):
            values["organization_id"] = self.organization.pk
        instance = kind.model(**values)
        excluded = [
            f.name
            for f in kind.model._meta.concrete_fields
            if f.is_relation or f.primary_key or f.name == "embedding" or getattr(f, "generated", False)
        ]
        instance.clean_fields(exclude=excluded)
        if "embedding" in kind.columns:
            self._vector(instance, vector)
        return instance

    def _remapped(self, column, value):
        try:
            return self.remap(value)
        except InputError:
            raise InputError(column, "Not a UUID.") from None

    @staticmethod
    def _check_names(values: dict):
        """The API's own rules for scope and session names, which the columns alone do not carry."""
        if "scope" in values and not (
            isinstance(values["scope"], str) and re.fullmatch(SCOPE_PATTERN, values["scope"])
        ):
            raise InputError("scope", "Use 1-64 letters, digits, '_', '.', ':' or '-'.")
        session_id = values.get("session_id")
        if isinstance(session_id, str) and not re.fullmatch(SESSION_ID_PATTERN, session_id):
            raise InputError("session_id", "Use 1-64 letters, digits, '_' or '-'.")
        for column in ("importance", "credibility"):
            if column in values and not (isinstance(values[column], (int, float)) and 0 <= values[column] <= 1):
                raise InputError(column, "Must lie between 0 and 1.")
        for column, value in values.items():
            if isinstance(value, str):
                check_text(value, field=column)

    def _vector(self, instance, vector):
        """Keeps a vector of the configured model; a vector of another model is marked for recomputing."""
        instance._recompute = False
        if vector is None:
            instance.embedding, instance.embedding_model = None, ""
        elif instance.embedding_model == self.model_name:
            if not isinstance(vector, str):
                raise InputError("embedding", "Must be base64 of float32 values, or null.")
            try:
                instance.embedding = vector_decode(vector, dimensions=self.dimensions)
            except ValueError as exc:
                raise InputError("embedding", str(exc)) from None
        else:
            instance.embedding, instance._recompute = None, True

    # Batches -----------------------------------------------------------------------------------

    def _flush(self, kind: k.Kind, batch: list):
        if not batch:
            return
        for column, (model, mode) in kind.parents.items():
            if model in (EndUser, Client):
                continue
            batch = self._with_parents(kind, batch, column, model, mode)
        instances = [instance for _, instance in batch]
        if kind.model is k.EDGES.model:
            for edge in instances:
                if edge.source_id > edge.target_id:  # remapped ids sort anew; a pair keeps one row
                    edge.source_id, edge.target_id = edge.target_id, edge.source_id
        self._recompute(kind, instances)
        try:
            with transaction.atomic(), _archived_timestamps(kind.model):
                kind.model.objects.bulk_create(instances, ignore_conflicts=True)
        except IntegrityError as exc:
            raise ArchiveError(
                f"{kind.file}:{batch[0][0]}-{batch[-1][0]}", f"The database refused these rows ({_constraint(exc)})."
            ) from None
        if kind.keeps_ids:
            self._check_stored(kind, batch)
        self._count(kind, len(instances))

    def _with_parents(self, kind, batch, column, model, mode):
        wanted = {getattr(instance, column) for _, instance in batch} - {None}
        organization = "skill__organization" if model is SkillVersion else "organization"
        present = set(
            model.objects.filter(pk__in=wanted, **{organization: self.organization}).values_list("pk", flat=True)
        )
        kept = []
        for line, instance in batch:
            value = getattr(instance, column)
            if value is None or value in present:
                kept.append((line, instance))
            elif mode == k.NULL:
                setattr(instance, column, None)
                kept.append((line, instance))
            elif mode == k.REFUSE:
                raise ArchiveError(
                    f"{kind.file}:{line}: {column}",
                    "Names a row that is neither earlier in the archive nor in the organisation.",
                )
        return kept

    def _recompute(self, kind, instances):
        stale = [instance for instance in instances if getattr(instance, "_recompute", False)]
        if not stale:
            return
        text = self.embedding_text[kind.model]
        for instance, vector in zip(stale, embed_texts([text(instance) for instance in stale])):
            instance.embedding, instance.embedding_model = vector, self.model_name
        self.recomputed += len(stale)

    def _check_stored(self, kind, batch):
        """A row that a unique name or key of the organisation kept out (not its own earlier import) is an error."""
        ids = [instance.pk for _, instance in batch]
        stored = set(kind.model.objects.filter(pk__in=ids).values_list("pk", flat=True))
        for line, instance in batch:
            if instance.pk not in stored:
                raise ArchiveError(
                    f"{kind.file}:{line}", "Conflicts with a row already in the organisation (the same name or key)."
                )

    def _count(self, kind, rows: int):
        self.counts[kind.name] = self.counts.get(kind.name, 0) + rows
        if self.on_progress:
            self.on_progress(
                kind.name, self.counts[kind.name], self.reader.manifest["files"].get(kind.file, {}).get("rows", 0)
            )


@contextmanager
def _archived_timestamps(model):
    """bulk_create stamps auto_now and auto_now_add columns with the current time; an import keeps
    the archive's. The flags are switched off only around the insert, and the import runs in its
    own process (a command), where no other thread saves these models meanwhile."""
    fields = [
        f for f in model._meta.concrete_fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    ]
    saved = [(f, f.auto_now, f.auto_now_add) for f in fields]
    for f in fields:
        f.auto_now = f.auto_now_add = False
    try:
        yield
    finally:
        for f, auto_now, auto_now_add in saved:
            f.auto_now, f.auto_now_add = auto_now, auto_now_add


def _constraint(exc: IntegrityError) -> str:
    diag = getattr(exc.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", None) or getattr(diag, "column_name", None)
    return f"{type(exc.__cause__ or exc).__name__} on {name}" if name else type(exc.__cause__ or exc).__name__


def archive_import(*, path, organization: Organization, on_progress=None) -> dict:
    """Imports the archive at `path` into `organization` in one transaction; returns rows per kind.

    Raises ArchiveError (naming the file, line and field) and stores nothing when any row is refused.
    """
    reader = ArchiveReader(path)
    try:
        reader.verify()
        importer = _Import(reader=reader, organization=organization, on_progress=on_progress)
        with transaction.atomic():
            counts = importer.run()
    finally:
        reader.close()
    logger.info("archive imported into organisation %s: %s rows", organization.pk, sum(counts.values()))
    return {
        "rows": counts,
        "vectors_recomputed": importer.recomputed,
        "embedding_model": importer.model_name,
        "archive_embedding_model": reader.manifest.get("embedding_model"),
        "selection": reader.manifest.get("selection"),
    }
