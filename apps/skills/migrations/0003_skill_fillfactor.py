from django.db import migrations


class Migration(migrations.Migration):
    """Every retrieval bumps its skills' counters. Free room on each page lets PostgreSQL make
    those updates heap-only (no new entries in the HNSW, GIN and trigram indexes)."""

    dependencies = [
        ("skills", "0002_admin_order_indexes"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE skills_skill SET (fillfactor = 80)",
            reverse_sql="ALTER TABLE skills_skill RESET (fillfactor)",
        ),
    ]
