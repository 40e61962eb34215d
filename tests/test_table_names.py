"""No table of ours is named in the code outside migrations: SQL names tables through the models
(`Model._meta.db_table`), so a rename or a new rule cannot leave a query on the old table."""

import re
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent


def _our_tables() -> set[str]:
    return {
        model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model.__module__.startswith("apps.")
    }


def _named(tables: set[str], text: str) -> list[str]:
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, tables), key=len, reverse=True)) + r")\b")
    return [match.group(0) for match in pattern.finditer(text)]


def test_the_check_finds_a_table_named_in_sql():
    tables = _our_tables()
    assert {"conversations_message", "tenancy_enduser", "pipeline_memorytask"} <= tables
    assert _named(tables, 'f"SELECT id FROM tenancy_enduser e WHERE e.user_id = %s"') == ["tenancy_enduser"]
    assert _named(tables, "conversations_session_transcript") == []  # a longer word is not the table


def test_no_table_of_ours_is_named_outside_migrations():
    tables = _our_tables()
    found = [
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path in sorted((ROOT / "apps").rglob("*.py"))
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for name in _named(tables, line)
    ]
    assert not found, "name these tables through their models (Model._meta.db_table):\n" + "\n".join(found)
