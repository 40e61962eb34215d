"""Inserts without the ORM's per-row work. Rows written with COPY: what `bulk_create` does, in one round
trip that sends the values as data, so neither Django nor PostgreSQL builds and parses a statement as
long as the rows, and Django builds no instance of them. One instance inserted unless it conflicts,
saying whether it was stored, so nothing has to be read back. Ingest (apps.conversations) writes turns this way; import
(apps.portability) prepares values with the same `preparer`."""

from contextlib import nullcontext
from functools import partial

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper
from django.db.models import Field
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery
from django.utils import timezone

# Fields whose Python value (a str, number, bool or UUID) is what the database is sent: the rest (JSON,
# times, vectors, arrays) go through the field's own get_db_prep_save, as a model's save would.
SENT_AS_IS = frozenset(
    (
        "CharField",
        "SlugField",
        "TextField",
        "BooleanField",
        "IntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "FloatField",
        "UUIDField",
        "ForeignKey",
        "OneToOneField",
    )
)


def preparer(field: Field):
    """What turns the field's Python value into what the database is sent; None: the value itself."""
    internal_type = field.get_internal_type()
    if internal_type in SENT_AS_IS:
        return None
    prepare = partial(field.get_db_prep_save, connection=connection)
    if internal_type == "DateTimeField":  # an aware time is sent as it is; the field makes a naive one aware
        return lambda value: value if value is None or value.tzinfo is not None else prepare(value)
    return prepare


def copy_create(model, rows: list[dict]) -> int:
    """Inserts new rows of `model`, each a dict of field attribute names and Python values, as `bulk_create`
    would insert instances, without building them: a field a row leaves out takes its default (a callable
    one, such as a UUID key, called per row) and the creation and update times take now; generated
    columns are left to the database. A refused row (a constraint) raises the same `IntegrityError` as an
    INSERT, and nothing of the batch is stored. Returns the number of rows written."""
    if not rows:
        return 0
    fields = [field for field in model._meta.concrete_fields if not field.generated]
    now = timezone.now()
    # (attribute, what prepares its value, its value when a row leaves it out, or what makes it per row)
    filled = []
    for field in fields:
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            filled.append((field.attname, preparer(field), now, None))
        elif field.has_default() and callable(field.default):
            filled.append((field.attname, preparer(field), None, field.default))
        else:
            filled.append((field.attname, preparer(field), field.get_default(), None))
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    with connection.wrap_database_errors, connection.cursor() as cursor:
        # Counted and timed like any statement where queries are recorded (tests, DEBUG).
        recorded = cursor.debug_sql(sql) if isinstance(cursor, CursorDebugWrapper) else nullcontext()
        with recorded, cursor.cursor.copy(sql) as copy:
            for values in rows:
                row = []
                for attname, prepare, missing, make in filled:
                    value = values[attname] if attname in values else missing if make is None else make()
                    row.append(value if prepare is None else prepare(value))
                copy.write_row(row)
    return len(rows)


def insert_unless_conflict(instance) -> bool:
    """Inserts a new instance unless a unique constraint already holds its values (`INSERT … ON CONFLICT
    DO NOTHING RETURNING`, in one round trip): whether it was stored. A concurrent insert of the same
    values is waited for, as by `bulk_create(ignore_conflicts=True)`; other violations (a CHECK) raise."""
    model = type(instance)
    query = InsertQuery(model, on_conflict=OnConflict.IGNORE)
    query.insert_values([field for field in model._meta.concrete_fields if not field.generated], [instance])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [model._meta.pk]
    [(sql, params)] = compiler.as_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        stored = cursor.fetchone() is not None
    if stored:
        instance._state.adding, instance._state.db = False, connection.alias
    return stored
