"""Reads of the search app about the stored vectors themselves (no tenant: operators' questions)."""

from django.db import connection

from apps.providers.embeddings import embedding_model_name
from apps.search.registry import SOURCES

# The distinct non-empty models of a table, one index probe each (a loose index scan).
_MODELS_SQL = """
    WITH RECURSIVE models(name) AS (
        (SELECT embedding_model FROM {table} WHERE embedding_model > '' ORDER BY embedding_model LIMIT 1)
        UNION ALL
        SELECT (SELECT embedding_model FROM {table} WHERE embedding_model > models.name ORDER BY embedding_model LIMIT 1)
        FROM models WHERE models.name IS NOT NULL
    )
    SELECT name FROM models WHERE name IS NOT NULL
"""


def foreign_embedding_models() -> dict[str, list[str]]:
    """Per memory type, the models other than the configured one that made stored vectors (their items
    are found by keywords alone until `manage.py reembed` moves them)."""
    configured = embedding_model_name()
    found = {}
    with connection.cursor() as cursor:
        for memory_type, source in SOURCES.items():
            if source.embedding_text is None:
                continue
            cursor.execute(_MODELS_SQL.format(table=connection.ops.quote_name(source.model._meta.db_table)))
            others = [name for (name,) in cursor.fetchall() if name != configured]
            if others:
                found[memory_type] = others
    return found


def embedding_model_problem() -> str | None:
    """One sentence for operators when stored vectors were made by another model, else None."""
    found = foreign_embedding_models()
    if not found:
        return None
    listed = "; ".join(f"{memory_type}: {', '.join(models)}" for memory_type, models in found.items())
    return (
        f"Stored vectors were made by another model than the configured {embedding_model_name()} ({listed}); "
        "searches find those items by keywords only. Run `python manage.py reembed` to move them."
    )
