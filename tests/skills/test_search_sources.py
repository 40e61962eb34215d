"""The skill memory types in the one search engine: every method respects organisation and read scopes."""

import pytest

from apps.search.engine import search
from apps.search.registry import METHODS, SOURCES
from tests.factories import ClientFactory
from tests.skills.makers import MAKERS, make_skill

pytestmark = pytest.mark.django_db

TEXT = "zebrafish aquarium maintenance schedule"


def test_both_types_are_registered_with_their_tables():
    assert SOURCES["procedural"].model._meta.db_table == "skills_skill"
    assert SOURCES["experience"].model._meta.db_table == "skills_skillexperience"


@pytest.mark.parametrize("memory_type", sorted(MAKERS))
@pytest.mark.parametrize("method", METHODS)
def test_scope_matrix(memory_type, method, client_a, foreign_client, add_messages):
    organization = client_a.organization
    readable_writer = ClientFactory(organization=organization, write_scope="team")
    hidden_writer = ClientFactory(organization=organization, write_scope="secret")
    reading_client = ClientFactory(organization=organization, write_scope=None, read_scopes=["team"])
    make = MAKERS[memory_type]
    readable = make(readable_writer, "alice", TEXT + " readable")
    hidden = make(hidden_writer, "alice", TEXT + " hidden")
    foreign = make(foreign_client, "alice", TEXT + " foreign")

    for filters in ({"user_id": "alice"}, {}):
        hits = search(
            reader=reading_client.reader,
            query="zebrafish aquarium",
            memory_types=[memory_type],
            method=method,
            limit=10,
            filters=filters,
        )
        found = {hit.instance.pk for hit in hits}
        assert readable.pk in found, (memory_type, method, filters)
        assert hidden.pk not in found and foreign.pk not in found
    # The empty query (most recent items) is scoped the same way.
    hits = search(
        reader=reading_client.reader, query="", memory_types=[memory_type], method=method, limit=10, filters={}
    )
    assert {hit.instance.pk for hit in hits} == {readable.pk}


@pytest.mark.parametrize("method", METHODS)
def test_only_active_skills_are_searchable(method, client_a):
    from apps.skills.models import Skill

    active = make_skill(client_a, "alice", TEXT)
    Skill.objects.filter(pk=make_skill(client_a, "alice", TEXT + " waiting").pk).update(status="pending_review")
    found = {
        hit.instance.pk
        for hit in search(
            reader=client_a.reader,
            query="zebrafish aquarium",
            memory_types=["procedural"],
            method=method,
            limit=10,
            filters={},
        )
    }
    assert found == {active.pk}


def test_search_items_carry_the_skill_fields(client_a):
    skill = make_skill(client_a, "alice", TEXT)
    item = SOURCES["procedural"].to_item(skill)
    assert item == {
        "name": skill.name,
        "description": TEXT,
        "instructions": TEXT,
        "triggers": [],
        "examples": [],
        "entry_type": "guide",
        "version": 1,
        "status": "active",
        "shared": True,
        "scope": "default",
    }
