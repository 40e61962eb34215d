"""Inserts without the ORM's per-row work: rows by COPY (`bulk_create` in one round trip, no instances),
and one instance unless it conflicts, saying whether it was stored."""

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
    "CharField SlugField TextField BooleanField IntegerField PositiveIntegerField PositiveSmallIntegerField"
    " BigIntegerField SmallIntegerField FloatField UUIDField ForeignKey OneToOneField".split()
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
    """Inserts rows (dicts by attribute name) as `bulk_create` would, defaults filled per row; a refused
    row raises IntegrityError and stores nothing of the batch. Returns the number of rows written."""
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
    """`INSERT … ON CONFLICT DO NOTHING RETURNING`: whether it was stored. A concurrent insert of the same
    values is waited for; other violations (a CHECK) raise."""
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
