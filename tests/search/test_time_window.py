"""A time named in a search's query becomes a window of days (apps.search.engine): a filter, a
boost or nothing (SEARCH_TIME_WINDOW, or `time_window` in the request), shown in the response."""

import pytest

from apps.conversations.models import Message
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.search.engine import search
from tests.memories.makers import semantic

pytestmark = pytest.mark.django_db

SESSIONS = [
    ("jan", "2023-01-20T10:00:00+00:00", "I went hiking in the hills with my brother."),
    ("may", "2023-05-14T10:00:00+00:00", "I went hiking in the hills again, it rained."),
    ("june", "2023-06-02T10:00:00+00:00", "Last month I went hiking in the hills with Sam."),
]
QUESTION = "Where did I go hiking in May 2023?"


@pytest.fixture
def hikes(client_a, add_messages, settings):
    settings.RERANKER = "none"  # the fused order, so the window's effect alone is seen
    for session_id, occurred_at, text in SESSIONS:
        body = add_messages(
            client_a,
            user_id="alice",
            session_id=session_id,
            messages=[{"role": "user", "content": text, "occurred_at": occurred_at}],
        )
        for task in MemoryTask.objects.filter(pk__in=body["task_ids"], task_type="embed_messages"):
            task_execute(task_id=task.pk, worker="test")
    return {session_id: text for session_id, _, text in SESSIONS}


def ask(api, **options):
    return api.post(
        "/api/v1/memory/search",
        {"user_id": "alice", "query": QUESTION, "memory_types": ["message"], "search_method": "bm25", **options},
        format="json",
    )


def test_a_filter_keeps_what_happened_then_or_names_those_days(api, hikes):
    body = ask(api, time_window="filter").json()
    assert body["time_window"] == {
        "expression": "in May 2023",
        "start": "2023-05-01",
        "end": "2023-05-31",
        "mode": "filter",
    }
    # The May turn, and the June turn whose "last month" is May; not January's.
    assert {result["content"] for result in body["results"]} == {hikes["may"], hikes["june"]}


def test_a_boost_keeps_everything_but_ranks_the_window_first(api, hikes):
    body = ask(api, time_window="boost").json()
    assert body["time_window"]["mode"] == "boost"
    contents = [result["content"] for result in body["results"]]
    assert set(contents[:2]) == {hikes["may"], hikes["june"]} and contents[2] == hikes["jan"]


def test_off_or_a_query_naming_no_time_has_no_window(api, hikes):
    body = ask(api, time_window="off").json()
    assert body["time_window"] is None and body["count"] == 3
    body = ask(api, query="Where did I go hiking?", time_window="filter").json()
    assert body["time_window"] is None and body["count"] == 3


def test_the_default_mode_is_the_setting(api, hikes, settings):
    settings.SEARCH_TIME_WINDOW = "filter"
    assert ask(api).json()["count"] == 2
    settings.SEARCH_TIME_WINDOW = "off"
    assert ask(api).json()["time_window"] is None


def test_a_bad_mode_is_refused_naming_the_field(api, hikes):
    response = ask(api, time_window="sometimes")
    assert response.status_code == 400 and "time_window:" in response.json()["error"]["message"]


def test_the_window_is_resolved_against_the_callers_now(client_a, hikes):
    from datetime import datetime, timezone

    hits = search(
        reader=client_a.reader,
        query="Where did I go hiking last month?",
        memory_types=["message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
        time_window="filter",
        now=datetime(2023, 6, 20, tzinfo=timezone.utc),
    )
    assert (hits.time_window.start.isoformat(), hits.time_window.end.isoformat()) == ("2023-05-01", "2023-05-31")
    assert {hit.instance.content for hit in hits} == {hikes["may"], hikes["june"]}


def test_memories_are_in_the_window_by_the_days_their_words_name(client_a, hikes):
    from apps.memories.services.dates import dates_normalize

    named = semantic(client_a.organization, "default", "alice", "Alice", "Hiked the hills in May 2023.")
    semantic(client_a.organization, "default", "alice", "Alice", "Hiked the hills every winter.")
    dates_normalize(organization=client_a.organization)
    hits = search(
        reader=client_a.reader,
        query="hills hiked in May 2023",
        memory_types=["semantic", "message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
        time_window="filter",
    )
    assert {hit.instance.pk for hit in hits if hit.source.memory_type == "semantic"} == {named.pk}
    assert Message.objects.filter(date_span__isnull=False).count() == 1


def test_a_filter_leaves_timeless_types_alone(client_a, hikes):
    from tests.skills.makers import make_skill

    skill = make_skill(client_a, "alice", "hiking in the hills safely")
    hits = search(
        reader=client_a.reader,
        query="hiking in the hills in January 2021",
        memory_types=["procedural", "message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
        time_window="filter",
    )
    # No turn of January 2021; the skill, which has no date, is still found.
    assert [hit.instance.pk for hit in hits] == [skill.pk]
