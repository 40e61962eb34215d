"""Rows written with COPY: what `bulk_create` does for new instances, in one round trip that sends the
values as data, so neither Django nor PostgreSQL builds and parses a statement as long as the rows.
Import (apps.portability) and ingest (apps.conversations) write this way."""

from contextlib import nullcontext
from functools import partial

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper
from django.db.models import Field

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


def copy_create(instances: list) -> None:
    """Inserts new instances of one model, as `bulk_create` would: each field's `pre_save` (creation
    times), its database value, generated columns left to the database. A refused row (a constraint)
    raises the same `IntegrityError` as an INSERT, and nothing of the batch is stored."""
    if not instances:
        return
    model = type(instances[0])
    fields = [field for field in model._meta.concrete_fields if not field.generated]
    # pre_save does work only for the fields that set their own value (auto_now, auto_now_add).
    filled = [
        (field, preparer(field), getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False))
        for field in fields
    ]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
    with connection.wrap_database_errors, connection.cursor() as cursor:
        # Counted and timed like any statement where queries are recorded (tests, DEBUG).
        recorded = cursor.debug_sql(sql) if isinstance(cursor, CursorDebugWrapper) else nullcontext()
        with recorded, cursor.cursor.copy(sql) as copy:
            for instance in instances:
                row = []
                for field, prepare, sets_itself in filled:
                    value = field.pre_save(instance, True) if sets_itself else getattr(instance, field.attname)
                    row.append(value if prepare is None else prepare(value))
                copy.write_row(row)
    for instance in instances:
        instance._state.adding, instance._state.db = False, connection.alias
