"""The Citus table of docs/operations.md ("Sharding by organisation") stays true of the models: every
table of the platform is placed, the ones it says carry `organization_id` do (and the others do not),
and every unique constraint of a distributed table that lacks the organisation is named as a change."""

import re
from pathlib import Path

from django.apps import apps
from django.db import models

OPERATIONS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"


def platform_tables() -> dict[str, type[models.Model]]:
    tables = {}
    for model in apps.get_models(include_auto_created=True):
        if model.__module__.startswith("apps.") or (
            model._meta.auto_created and model._meta.auto_created.__module__.startswith("apps.")
        ):
            tables[model._meta.db_table] = model
    return tables


def citus_rows() -> list[dict]:
    text = OPERATIONS.read_text()
    section = text[text.index("### Sharding by organisation") :]
    section = section[section.index("| table |") :]
    section = section[: section.index("\n\n")]
    rows = []
    for line in section.splitlines()[2:]:
        table, has_organization, placement, change = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append(
            {
                "tables": re.findall(r"`([a-z]+_[a-z_]+)`", table),
                "link_tables": "link table" in table,
                "has_organization": has_organization,
                "placement": placement,
                "change": change,
            }
        )
    return rows


def placed_tables() -> dict[str, dict]:
    placed = {}
    for row in citus_rows():
        for table in row["tables"]:
            placed[table] = row
    tables = platform_tables()
    for row in citus_rows():  # "(+ its `experiences` link table)": the auto-created many-to-many tables
        if row["link_tables"]:
            for table in row["tables"]:
                for field in tables[table]._meta.many_to_many:
                    placed[field.remote_field.through._meta.db_table] = row
    return placed


def has_organization(model) -> bool:
    return any(field.column == "organization_id" for field in model._meta.concrete_fields)


def test_every_table_of_the_platform_is_placed():
    placed = placed_tables()
    assert set(platform_tables()) - set(placed) == set(), "add the table to the Citus table of operations.md"
    assert set(placed) - set(platform_tables()) == set(), "the Citus table names a table that does not exist"


def test_the_tables_said_to_carry_the_organisation_do():
    tables = platform_tables()
    for table, row in placed_tables().items():
        if row["has_organization"].startswith("yes"):
            assert has_organization(tables[table]), table
        elif row["has_organization"].startswith(("no", "**no**")):
            assert not has_organization(tables[table]), table


def test_every_unique_constraint_without_the_organisation_of_a_distributed_table_is_named():
    tables = platform_tables()
    for table, row in placed_tables().items():
        if not row["placement"].startswith("distributed"):
            continue
        model = tables[table]
        for constraint in model._meta.constraints:
            if isinstance(constraint, models.UniqueConstraint) and "organization" not in constraint.fields:
                assert constraint.name in row["change"], (table, constraint.name)
        for field in model._meta.concrete_fields:
            if field.unique and not field.primary_key and has_organization(model):
                assert f"{table}.{field.name}" in row["change"] or f"`{field.name}`" in row["change"], (table, field)
