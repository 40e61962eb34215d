"""Import of an archive into an organisation: every row validated, every id remapped, all or nothing."""

import logging
import re
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Field

from apps.conversations.models import SESSION_ID_PATTERN
from apps.conversations.turns import cut
from apps.core.bulk import preparer
from apps.core.validation import InputError
from apps.memories.models import DETAILS_MAX_LENGTH, SUMMARY_MAX_LENGTH
from apps.portability import kinds as k
from apps.portability.archive import ArchiveError, ArchiveReader, vector_decode
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.search.registry import SOURCES
from apps.skills.models import Skill, SkillExperience, SkillVersion
from apps.skills.screen import screen_flags
from apps.skills.services.lessons import CONTENT_MAX_CHARS
from apps.tenancy.models import SCOPE_PATTERN, Client, EndUser, Organization

logger = logging.getLogger(__name__)


# A longer text is refused as the API refuses it; a turn is instead cut, as ingest cuts it.
TEXT_LIMITS = {
    k.EXPERIENCES: {"content": CONTENT_MAX_CHARS},
    k.EPISODIC: {"summary": SUMMARY_MAX_LENGTH, "details": DETAILS_MAX_LENGTH},
    k.SEMANTIC: {"summary": SUMMARY_MAX_LENGTH, "details": DETAILS_MAX_LENGTH},
}


@dataclass(frozen=True)
class _Table:
    kind: k.Kind
    columns: tuple[str, ...]
    cleaned: tuple[Field, ...]
    # In the order of the COPY and the INSERT; `prepared` holds each one's preparer (None: as it is).
    written: tuple[Field, ...]
    prepared: tuple
    has_organization: bool

    @classmethod
    def of(cls, kind: k.Kind) -> "_Table":
        columns = tuple(kind.columns)
        fields = [f for f in kind.model._meta.concrete_fields if not f.generated]
        written = tuple(
            f
            for f in fields
            if f.name == "organization" or (f.attname in columns and (kind.keeps_ids or not f.primary_key))
        )
        return cls(
            kind=kind,
            columns=columns,
            cleaned=tuple(
                f
                for f in fields
                if f.attname in columns and not (f.is_relation or f.primary_key or f.name == "embedding")
            ),
            written=written,
            prepared=tuple(preparer(f) for f in written),
            has_organization=any(f.name == "organization" for f in fields),
        )

    @property
    def stage(self) -> str:
        return connection.ops.quote_name(f"portability_import_{self.kind.name}")

    @property
    def column_list(self) -> str:
        return ", ".join(connection.ops.quote_name(f.column) for f in self.written)


class _Import:
    def __init__(self, *, reader: ArchiveReader, organization: Organization, trust: bool = False, on_progress=None):
        self.reader = reader
        self.organization = organization
        self.trust = trust
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
        self.changed = {"turns_cut": 0, "skills_held_for_review": 0, "lessons_flagged": 0, "lessons_unapproved": 0}
        self.batch_size = settings.PORTABILITY_BATCH_SIZE
        # Parents repeat from row to row (a session's turns).
        self.parent_id = lru_cache(maxsize=self.batch_size)(self.remap)

    def remap(self, value, column: str = "") -> uuid.UUID:
        # Deterministic, so references anywhere move without a lookup table and a second import changes nothing.
        try:
            old = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except ValueError:
            raise InputError(column, "Not a UUID.") from None
        return uuid.uuid5(self.namespace, str(old))

    def run(self) -> dict:
        self._end_users()
        self._clients()
        for kind in k.KINDS:
            if kind in k.NATURAL or not kind.importable or kind.file not in self.reader.manifest["files"]:
                continue
            table = _Table.of(kind)
            rows = (
                (line, *self._located(kind, line, self._values, table, row))
                for line, row in self.reader.rows(kind.file)
            )
            with _staged(table):
                while batch := list(islice(rows, self.batch_size)):
                    self._flush(table, batch)
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

    @staticmethod
    def _checked_row(columns, row: dict) -> dict:
        if row.keys() == set(columns):
            return row
        unknown, missing = sorted(set(row) - set(columns)), [column for column in columns if column not in row]
        if unknown:
            raise InputError(unknown[0], "Unknown field for this kind of row.")
        raise InputError(missing[0], "Missing.")

    def _natural_rows(self, kind, key: str):
        rows = (self._natural_row(kind, key, line, row) for line, row in self.reader.rows(kind.file))
        while batch := list(islice(rows, self.batch_size)):
            yield batch

    def _natural_row(self, kind, key: str, line, row):
        row = self._located(kind, line, self._checked_row, kind.columns, row)
        value = row[key]
        if not isinstance(value, str) or not value.strip() or len(value) > 200:
            raise ArchiveError(f"{kind.file}:{line}: {key}", "Must be a non-empty string of at most 200 characters.")
        self._located(kind, line, self.remap, row["id"])
        return line, row

    def _end_users(self):
        for batch in self._natural_rows(k.END_USERS, "user_id"):
            # A user already in the organisation keeps its row: ignore_conflicts skips the insert.
            wanted = {row["user_id"]: row for _, row in batch}
            EndUser.objects.bulk_create(
                [
                    EndUser(id=self.remap(row["id"]), organization=self.organization, user_id=user_id)
                    for user_id, row in wanted.items()
                ],
                ignore_conflicts=True,
            )
            known = EndUser.objects.filter(organization=self.organization, user_id__in=wanted)
            existing = dict(known.values_list("user_id", "pk"))
            for _, row in batch:
                self.users[str(row["id"])] = existing[row["user_id"]]
            self._count(k.END_USERS, len(batch))

    def _clients(self):
        # A missing client is created disabled, without keys: an operator decides whether it may act.
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
            return self.parent_id(value)
        if str(value) in mapping:
            return mapping[str(value)]
        if mode == k.NULL:
            return None
        raise InputError(column, f"Names a row that is not in {'end_users' if model is EndUser else 'clients'}.jsonl.")

    def _values(self, table: _Table, row: dict) -> tuple[dict, bool]:
        kind = table.kind
        row = self._checked_row(table.columns, row)
        values, vector = {}, None
        for column in table.columns:
            value = row[column]
            if column == "id":
                if kind.keeps_ids:
                    values["id"] = self.remap(value, column)
            elif column in kind.parents:
                values[column] = self._reference(kind, column, value)
            elif column in kind.id_columns:
                values[column] = None if value is None else self.remap(value, column)
            elif column in kind.id_arrays:
                if not isinstance(value, list):
                    raise InputError(column, "Must be a list of ids.")
                values[column] = [self.remap(item, column) for item in value]
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
            kind.remap_json(values, lambda value: str(self.remap(value, "ids")))
        self._check_names(values)
        if table.has_organization:
            values["organization_id"] = self.organization.pk
        for f in table.cleaned:  # Model.clean_fields, field by field, without building the instance
            raw = values[f.attname]
            if f.blank and raw in f.empty_values:
                continue
            try:
                values[f.attname] = f.clean(raw, None)
            except ValidationError as exc:
                raise ValidationError({f.name: exc.error_list}) from None
        was_cut = self._limited(kind, values)
        if not self.trust:
            self._distrusted(kind, values)
        recompute = self._vector(values, vector) if "embedding" in table.columns else False
        if was_cut and values.get("embedding") is not None:  # the vector encodes the whole text
            values["embedding"], recompute = None, True
        return values, recompute

    def _limited(self, kind, values: dict) -> bool:
        """Returns whether a turn was cut."""
        if kind is k.MESSAGES and isinstance(values["content"], str):
            content, was_cut = cut(values["content"], settings.MESSAGE_MAX_CHARS)
            if was_cut:
                values["content"], values["truncated"] = content, True
                self.changed["turns_cut"] += 1
            return was_cut
        for column, limit in TEXT_LIMITS.get(kind, {}).items():
            if isinstance(values[column], str) and len(values[column]) > limit:
                raise InputError(column, f"{len(values[column])} characters; the API accepts at most {limit}.")
        return False

    def _distrusted(self, kind, values: dict) -> None:
        # Anyone can edit an archive and recompute its checksums: what a person decides is decided anew.
        if kind is k.SKILLS:
            if values["status"] == Skill.Status.ACTIVE:
                values["status"] = Skill.Status.PENDING_REVIEW
                self.changed["skills_held_for_review"] += 1
            values["shared"] = False
        elif kind is k.EXPERIENCES:
            if values["approved_by"]:
                values["approved_by"] = ""
                self.changed["lessons_unapproved"] += 1
            flags = screen_flags(values["title"], values["content"])
            values["flags"] = sorted(set(values["flags"] or ()) | set(flags))
            waiting = (SkillExperience.Status.PENDING, SkillExperience.Status.HELD)
            if flags and values["status"] in waiting:
                values["status"] = SkillExperience.Status.FLAGGED
                self.changed["lessons_flagged"] += 1

    @staticmethod
    def _check_names(values: dict):
        if "scope" in values and not (
            isinstance(values["scope"], str) and re.fullmatch(SCOPE_PATTERN, values["scope"])
        ):
            raise InputError("scope", "Use 1-64 letters, digits, '_', '.', ':' or '-'.")
        session_id = values.get("session_id")  # blank where none was named (a skill use); a session's is required
        if isinstance(session_id, str) and session_id and not re.fullmatch(SESSION_ID_PATTERN, session_id):
            raise InputError("session_id", "Use 1-64 letters, digits, '_' or '-'.")
        for column in ("importance", "credibility"):
            if column in values and not (isinstance(values[column], (int, float)) and 0 <= values[column] <= 1):
                raise InputError(column, "Must lie between 0 and 1.")

    def _vector(self, values: dict, vector) -> bool:
        """Returns whether the vector is another model's, to be recomputed."""
        if vector is None:
            values["embedding"], values["embedding_model"] = None, ""
            return False
        if values["embedding_model"] != self.model_name:
            values["embedding"] = None
            return True
        if not isinstance(vector, str):
            raise InputError("embedding", "Must be base64 of float32 values, or null.")
        try:
            values["embedding"] = vector_decode(vector, dimensions=self.dimensions)
        except ValueError as exc:
            raise InputError("embedding", str(exc)) from None
        return False

    def _flush(self, table: _Table, batch: list):
        # COPY, then INSERT ... SELECT: a multi-row INSERT of thousands of bound values costs more to parse than to store.
        kind = table.kind
        for column, (model, mode) in kind.parents.items():
            if model in (EndUser, Client):
                continue
            batch = self._with_parents(kind, batch, column, model, mode)
        if kind is k.EDGES:
            for _, values, _ in batch:
                if values["source_id"] > values["target_id"]:  # remapped ids sort anew; a pair keeps one row
                    values["source_id"], values["target_id"] = values["target_id"], values["source_id"]
        self._recompute(kind, [values for _, values, recompute in batch if recompute])
        fields, columns = tuple(zip(table.written, table.prepared)), table.column_list
        try:
            with connection.wrap_database_errors, connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {table.stage}")
                with cursor.cursor.copy(f"COPY {table.stage} ({columns}, import_line) FROM STDIN") as copy:
                    for line, values, _ in batch:
                        copy.write_row(
                            [
                                *(
                                    values[f.attname] if prepare is None else prepare(values[f.attname])
                                    for f, prepare in fields
                                ),
                                line,
                            ]
                        )
                cursor.execute(
                    f"INSERT INTO {connection.ops.quote_name(kind.model._meta.db_table)} ({columns}) "
                    f"SELECT {columns} FROM {table.stage} ORDER BY import_line ON CONFLICT DO NOTHING"
                )
        except DatabaseError as exc:
            raise ArchiveError(
                f"{kind.file}:{batch[0][0]}-{batch[-1][0]}", f"The database refused these rows ({_constraint(exc)})."
            ) from None
        if kind.keeps_ids:
            self._check_stored(table)
        self._count(kind, len(batch))

    def _with_parents(self, kind, batch, column, model, mode):
        wanted = {values[column] for _, values, _ in batch} - {None}
        organization = "skill__organization" if model is SkillVersion else "organization"
        shared = kind.same_as_parent.get(column, ())
        present = {
            pk: shared_values
            for pk, *shared_values in model.objects.filter(
                pk__in=wanted, **{organization: self.organization}
            ).values_list("pk", *shared)
        }
        kept = []
        for line, values, recompute in batch:
            value = values[column]
            if value in present:
                for name, parents in zip(shared, present[value]):
                    if values[name] != parents:
                        raise ArchiveError(
                            f"{kind.file}:{line}: {name}",
                            f"Differs from its {model._meta.verbose_name}'s ({column}): a row belongs to the "
                            "owner and scope of the row it belongs to.",
                        )
            elif value is not None:
                if mode == k.REFUSE:
                    raise ArchiveError(
                        f"{kind.file}:{line}: {column}",
                        "Names a row that is neither earlier in the archive nor in the organisation.",
                    )
                if mode == k.SKIP:
                    continue
                values[column] = None
            kept.append((line, values, recompute))
        return kept

    def _recompute(self, kind, stale: list[dict]):
        if not stale:
            return
        text = self.embedding_text[kind.model]
        vectors = embed_texts([text(kind.model(**values)) for values in stale])
        for values, vector in zip(stale, vectors):
            values["embedding"], values["embedding_model"] = vector, self.model_name
        self.recomputed += len(stale)

    def _check_stored(self, table: _Table):
        # A row a unique name or key kept out (not its own earlier import) is an error.
        pk = connection.ops.quote_name(table.kind.model._meta.pk.column)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT min(s.import_line) FROM {table.stage} s WHERE NOT EXISTS "
                f"(SELECT 1 FROM {connection.ops.quote_name(table.kind.model._meta.db_table)} t WHERE t.{pk} = s.{pk})"
            )
            (line,) = cursor.fetchone()
        if line is not None:
            raise ArchiveError(
                f"{table.kind.file}:{line}", "Conflicts with a row already in the organisation (the same name or key)."
            )

    def _count(self, kind, rows: int):
        self.counts[kind.name] = self.counts.get(kind.name, 0) + rows
        if self.on_progress:
            self.on_progress(
                kind.name, self.counts[kind.name], self.reader.manifest["files"].get(kind.file, {}).get("rows", 0)
            )


@contextmanager
def _staged(table: _Table):
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table.stage}")
        cursor.execute(
            f"CREATE TEMPORARY TABLE {table.stage} ON COMMIT DROP AS SELECT {table.column_list}, 0 AS import_line "
            f"FROM {connection.ops.quote_name(table.kind.model._meta.db_table)} WITH NO DATA"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {table.stage}")


def _constraint(exc: DatabaseError) -> str:
    diag = getattr(exc.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", None) or getattr(diag, "column_name", None)
    return f"{type(exc.__cause__ or exc).__name__} on {name}" if name else type(exc.__cause__ or exc).__name__


def archive_import(*, path, organization: Organization, trust: bool = False, on_progress=None) -> dict:
    """Raises ArchiveError and stores nothing when any row is refused; `trust` keeps reviews and approvals."""
    reader = ArchiveReader(
        path,
        max_bytes=settings.IMPORT_MAX_BYTES,
        max_file_bytes=settings.IMPORT_MAX_FILE_BYTES,
        max_ratio=settings.IMPORT_MAX_COMPRESSION_RATIO,
    )
    try:
        reader.verify()
        importer = _Import(reader=reader, organization=organization, trust=trust, on_progress=on_progress)
        with transaction.atomic():
            counts = importer.run()
    finally:
        reader.close()
    logger.info(
        "archive imported into organisation %s: %s rows (trusted: %s)", organization.pk, sum(counts.values()), trust
    )
    return {
        "rows": counts,
        "trusted": trust,
        **importer.changed,
        "vectors_recomputed": importer.recomputed,
        "embedding_model": importer.model_name,
        "archive_embedding_model": reader.manifest.get("embedding_model"),
        "selection": reader.manifest.get("selection"),
    }
