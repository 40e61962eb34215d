"""An index on `embedding_model` of every searchable table, so the models present are read in a few
index probes (apps.search.selectors.foreign_embedding_models, behind `check` and /readyz) instead
of a scan of every row. The tables belong to other apps; the index serves this one's question, so it
is created here in SQL, outside the models' state."""

from django.db import migrations

TABLES = (
    "conversations_message",
    "skills_skill",
    "skills_skillexperience",
    "memories_episodicmemory",
    "memories_semanticmemory",
    "profiles_profile",
)


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0001_initial"),
        ("conversations", "0007_message_learned_at"),
        ("skills", "0005_fuzzy_expression_indexes"),
        ("memories", "0003_fuzzy_expression_indexes"),
        ("profiles", "0002_search_storage"),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX IF NOT EXISTS {table}_embedding_model_idx ON {table} (embedding_model)",
            reverse_sql=f"DROP INDEX IF EXISTS {table}_embedding_model_idx",
        )
        for table in TABLES
    ]
