"""Episodic and semantic memories through the shared search engine and the search API."""

from datetime import datetime, timezone

import pytest
from django.utils import timezone as django_timezone

from apps.search.engine import search
from apps.search.registry import METHODS
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db


@pytest.fixture
def memories(client_a):
    organization = client_a.organization
    return {
        "may": episodic(
            organization,
            "default",
            "caroline",
            "Caroline went hiking in the mountains.",
            occurred_at=datetime(2023, 5, 7, tzinfo=timezone.utc),
            actor="Caroline",
        ),
        "june": episodic(
            organization,
            "default",
            "caroline",
            "Caroline went hiking by the sea.",
            occurred_at=datetime(2023, 6, 20, tzinfo=timezone.utc),
            actor="Caroline",
        ),
        "fact": semantic(organization, "default", "caroline", "Caroline", "Caroline loves hiking."),
        "other_user": episodic(organization, "default", "melanie", "Melanie went hiking."),
    }


@pytest.mark.parametrize("method", METHODS)
def test_each_method_finds_the_users_live_memories_and_skips_soft_deleted_ones(client_a, memories, method):
    hits = search(
        reader=client_a.reader,
        query="hiking",
        memory_types=["episodic", "semantic"],
        method=method,
        limit=10,
        filters={"user_id": "caroline"},
    )
    assert {hit.instance.pk for hit in hits} == {memories[name].pk for name in ("may", "june", "fact")}
    for name in ("june", "fact"):
        memories[name].deleted_at = django_timezone.now()
        memories[name].save()
    hits = search(
        reader=client_a.reader,
        query="hiking",
        memory_types=["episodic", "semantic"],
        method=method,
        limit=10,
        filters={"user_id": "caroline"},
    )
    assert [hit.instance.pk for hit in hits] == [memories["may"].pk]


def test_time_range_filters_apply_to_when_the_event_occurred(client_a, memories):
    def found(**filters):
        hits = search(
            reader=client_a.reader,
            query="hiking",
            memory_types=["episodic"],
            method="hybrid",
            limit=10,
            filters={"user_id": "caroline", **filters},
        )
        return {hit.instance.pk for hit in hits}

    assert found(start=datetime(2023, 6, 1, tzinfo=timezone.utc)) == {memories["june"].pk}
    assert found(end=datetime(2023, 5, 31, tzinfo=timezone.utc)) == {memories["may"].pk}
    assert found(start=datetime(2023, 5, 1, tzinfo=timezone.utc), end=datetime(2023, 5, 7, tzinfo=timezone.utc)) == {
        memories["may"].pk
    }
    # Every memory was stored now: filtering on created_at would keep none of these apart.
    assert found(start=datetime(2024, 1, 1, tzinfo=timezone.utc)) == set()


def test_the_search_api_renders_memories_with_their_fields(api, memories):
    response = api.post(
        "/api/v1/memory/search",
        {
            "user_id": "caroline",
            "query": "hiking mountains",
            "memory_types": ["episodic", "semantic"],
            "start": "2023-05-01T00:00:00Z",
            "end": "2023-05-31T23:59:59Z",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    episodic_results = [result for result in results if result["memory_type"] == "episodic"]
    assert [result["id"] for result in episodic_results] == [str(memories["may"].pk)]
    item = episodic_results[0]
    assert item["occurred_at"] == "2023-05-07T00:00:00+00:00" and item["actor"] == "Caroline"
    assert item["user_id"] == "caroline" and item["time_granularity"] == "day" and item["source_message_ids"] == []
    semantic_results = [result for result in results if result["memory_type"] == "semantic"]
    assert semantic_results == []  # the fact was updated now, outside May 2023

    response = api.get("/api/v1/memory/search", {"user_id": "caroline", "query": "hiking", "memory_types": "semantic"})
    (fact,) = response.json()["results"]
    assert (fact["name"], fact["summary"], fact["scope"]) == ("Caroline", "Caroline loves hiking.", "default")
