from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("profiles", "0001_initial"),
    ]

    # As for every searchable type: a trigram index on exactly the fuzzy method's expression
    # (apps/profiles/search.py), and vectors kept inline rather than TOASTed.
    operations = [
        migrations.RunSQL(
            "CREATE INDEX profile_fuzzy_trgm_idx ON profiles_profile USING gin ((name || ' ' || markdown) gin_trgm_ops)",
            reverse_sql="DROP INDEX profile_fuzzy_trgm_idx",
        ),
        migrations.RunSQL(
            "ALTER TABLE profiles_profile ALTER COLUMN embedding SET STORAGE PLAIN, SET (toast_tuple_target = 4080)",
            reverse_sql="ALTER TABLE profiles_profile ALTER COLUMN embedding SET STORAGE EXTENDED, RESET (toast_tuple_target)",
        ),
    ]
