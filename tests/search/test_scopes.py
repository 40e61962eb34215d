"""Each memory type × each method × (readable scope / unreadable scope / other organisation)."""

import pytest

from apps.context.assembly import CONTEXT_TYPES, context_build
from apps.search.engine import search
from apps.search.registry import METHODS, SOURCES
from tests.factories import ClientFactory
from tests.search.conftest import PLANS
from tests.search.makers import MAKERS

pytestmark = pytest.mark.django_db

TEXT = "zebrafish aquarium maintenance schedule"


def test_every_registered_memory_type_has_a_maker():
    assert set(SOURCES) <= set(MAKERS), (
        f"add a maker for {sorted(set(SOURCES) - set(MAKERS))} in tests/search/makers.py"
    )


@pytest.mark.parametrize("memory_type", sorted(SOURCES))
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("plan", PLANS)
def test_scope_matrix(memory_type, method, plan, use_plan, client_a, foreign_client, add_messages):
    use_plan(plan)
    organization = client_a.organization
    readable_writer = ClientFactory(organization=organization, write_scope="team")
    hidden_writer = ClientFactory(organization=organization, write_scope="secret")
    reading_client = ClientFactory(organization=organization, write_scope=None, read_scopes=["team"])

    make = MAKERS[memory_type]
    readable = make(readable_writer, "alice", TEXT + " readable", add_messages)
    hidden = make(hidden_writer, "alice", TEXT + " hidden", add_messages)
    foreign = make(foreign_client, "alice", TEXT + " foreign", add_messages)

    # Twice each: on the index plan, an owner's first search scans their items and finds more
    # than the limit, so the second goes through the indexes.
    for filters in ({"user_id": "alice"}, {"user_id": "alice"}, {}):
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
        assert hidden.pk not in found and foreign.pk not in found, (memory_type, method, filters)
    # The empty query (most recent items) is scoped the same way.
    hits = search(
        reader=reading_client.reader, query="", memory_types=[memory_type], method=method, limit=10, filters={}
    )
    assert {hit.instance.pk for hit in hits} == {readable.pk}


@pytest.mark.parametrize("memory_type", CONTEXT_TYPES)
def test_context_scope_matrix(memory_type, client_a, foreign_client, add_messages):
    """The context reads what search reads: each type it uses, in the reader's scopes only."""
    organization = client_a.organization
    readable_writer = ClientFactory(organization=organization, write_scope="team")
    hidden_writer = ClientFactory(organization=organization, write_scope="secret")
    reading_client = ClientFactory(organization=organization, write_scope=None, read_scopes=["team"])
    make = MAKERS[memory_type]
    readable = make(readable_writer, "alice", TEXT + " readable", add_messages)
    hidden = make(hidden_writer, "alice", TEXT + " hidden", add_messages)
    foreign = make(foreign_client, "alice", TEXT + " foreign", add_messages)

    for query in ("zebrafish aquarium", ""):
        context = context_build(
            reader=reading_client.reader, user_id="alice", query=query, max_tokens=2000, memory_types=[memory_type]
        )
        found = {item.instance.pk for item in context.items}
        assert readable.pk in found, (memory_type, query)
        assert hidden.pk not in found and foreign.pk not in found, (memory_type, query)
