from django.db import migrations

# A 384-dimension vector is 1.5 kB: with the default TOAST threshold (about 2 kB a row) it is
# moved out of line, and ranking a user's items fetches each vector through the TOAST index
# (about five buffer reads per row). PLAIN keeps vectors in the row, uncompressed (floats do
# not compress); a 4 kB tuple target keeps the rest of a typical row (text, tsvector) beside it.
TABLES = ["memories_episodicmemory", "memories_semanticmemory"]


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            [f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE PLAIN, SET (toast_tuple_target = 4080)" for table in TABLES],
            reverse_sql=[f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTENDED, RESET (toast_tuple_target)" for table in TABLES],
        ),
    ]
