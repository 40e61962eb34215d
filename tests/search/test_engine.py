from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.search.engine import bm25, search
from tests.search.conftest import PLANS
from tests.search.makers import make_message

pytestmark = pytest.mark.django_db

TEXTS = [
    "I adopted a golden retriever puppy named Max last week",
    "My sister lives in Lisbon and works as a nurse at the children's hospital",
    "The restaurant booking is for Friday at eight",
    "We talked about the retriever again and Max's vet visit",
]


@pytest.fixture(autouse=True, params=PLANS)
def plan(request, use_plan):
    """Every test runs on both plans."""
    use_plan(request.param)


@pytest.fixture
def corpus(client_a, add_messages):
    return [make_message(client_a, "alice", text, add_messages) for text in TEXTS]


def contents(hits):
    return [hit.instance.content for hit in hits]


def test_bm25_ranks_rare_terms_above_common_ones(client_a, corpus):
    hits = search(
        reader=client_a.reader,
        query="where does my sister live as a nurse",
        memory_types=["message"],
        method="bm25",
        limit=5,
        filters={"user_id": "alice"},
    )
    assert contents(hits)[0] == TEXTS[1]
    hits = search(
        reader=client_a.reader,
        query="Max retriever vet",
        memory_types=["message"],
        method="bm25",
        limit=5,
        filters={"user_id": "alice"},
    )
    assert contents(hits)[0] == TEXTS[3]  # more matching terms, and "vet" is rare
    assert set(contents(hits)) == {TEXTS[0], TEXTS[3]}


def test_questions_made_of_stopwords_only_find_nothing_by_keyword(client_a, corpus):
    assert (
        search(reader=client_a.reader, query="what is it", memory_types=["message"], method="bm25", limit=5, filters={})
        == []
    )


def test_embedding_and_hybrid_return_the_best_match_first(client_a, corpus):
    for method in ("embedding", "hybrid"):
        hits = search(
            reader=client_a.reader,
            query="sister nurse Lisbon",
            memory_types=["message"],
            method=method,
            limit=2,
            filters={},
        )
        assert contents(hits)[0] == TEXTS[1], method
        assert len(hits) == 2


def test_fuzzy_tolerates_typos(client_a, corpus):
    hits = search(
        reader=client_a.reader, query="golden retreiver", memory_types=["message"], method="fuzzy", limit=5, filters={}
    )
    assert contents(hits)[0] == TEXTS[0]


def test_filters_user_session_time_and_tags(client_a, add_messages, corpus):
    other = make_message(client_a, "bob", "Bob also has a golden retriever", add_messages)
    base = {"query": "golden retriever", "memory_types": ["message"], "method": "hybrid", "limit": 10}
    assert other.pk not in {
        hit.instance.pk for hit in search(reader=client_a.reader, filters={"user_id": "alice"}, **base)
    }
    assert other.pk in {hit.instance.pk for hit in search(reader=client_a.reader, filters={}, **base)}
    by_session = search(reader=client_a.reader, filters={"session_id": other.session.session_id}, **base)
    assert [hit.instance.pk for hit in by_session] == [other.pk]
    future = timezone.now() + timedelta(days=1)
    assert search(reader=client_a.reader, filters={"start": future}, **base) == []
    assert search(reader=client_a.reader, filters={"filter_tags": {"scope": "default"}}, **base)
    assert search(reader=client_a.reader, filters={"filter_tags": {"team": "nope"}}, **base) == []
    assert search(reader=client_a.reader, filters={"session_tag": "task"}, **base) == []


def test_empty_query_returns_most_recent_first(client_a, corpus):
    hits = search(
        reader=client_a.reader, query="  ", memory_types=None, method=None, limit=2, filters={"user_id": "alice"}
    )
    assert contents(hits) == [TEXTS[3], TEXTS[2]]


def test_an_unknown_user_finds_nothing(client_a, corpus):
    assert (
        search(
            reader=client_a.reader,
            query="retriever",
            memory_types=None,
            method="hybrid",
            limit=5,
            filters={"user_id": "nobody"},
        )
        == []
    )


def test_both_plans_give_the_same_bm25_scores(client_a, corpus, settings):
    query = {
        "reader": client_a.reader,
        "query": "Max retriever vet Lisbon",
        "memory_types": ["message"],
        "method": "bm25",
        "limit": 5,
    }
    settings.SEARCH_SCAN_MAX_ROWS = 20000
    scanned = [(hit.instance.pk, round(hit.score, 9)) for hit in search(filters={"user_id": "alice"}, **query)]
    settings.SEARCH_SCAN_MAX_ROWS = 0
    indexed = [(hit.instance.pk, round(hit.score, 9)) for hit in search(filters={"user_id": "alice"}, **query)]
    assert len(scanned) == 3 and scanned == indexed


def test_an_owner_with_many_items_is_scanned_once_then_searched_through_the_indexes(client_a, corpus, settings):
    settings.SEARCH_SCAN_MAX_ROWS = 3  # alice has four turns
    # BM25: the GIN index is exact, so both plans must agree (this test does not vacuum the HNSW graph).
    query = {
        "reader": client_a.reader,
        "query": "retriever",
        "memory_types": ["message"],
        "method": "bm25",
        "limit": 5,
        "filters": {"user_id": "alice"},
    }
    with CaptureQueriesContext(connection) as first:
        first_hits = search(**query)
    with CaptureQueriesContext(connection) as second:
        second_hits = search(**query)

    def scanned(captured):
        return any("visible AS MATERIALIZED" in query["sql"] for query in captured.captured_queries)

    assert scanned(first) and not scanned(second)
    assert len(first_hits) == 2
    assert [(hit.instance.pk, round(hit.score, 9)) for hit in first_hits] == [
        (hit.instance.pk, round(hit.score, 9)) for hit in second_hits
    ]


@pytest.fixture
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_through_the_indexes_a_term_in_most_items_does_not_make_every_item_a_match(
    client_a, add_messages, settings, fresh_cache
):
    for n in range(8):
        make_message(client_a, "carol", f"weekly standup notes number {n}", add_messages)
    rare = make_message(client_a, "carol", "standup moved because of the zebra parade", add_messages)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")  # the planner's statistics name the common lexemes
    settings.SEARCH_SCAN_MAX_ROWS = 0
    query = {"reader": client_a.reader, "memory_types": ["message"], "method": "bm25", "limit": 20, "filters": {}}
    assert [hit.instance.pk for hit in search(query="standup zebra", **query)] == [rare.pk]
    # A query made only of common terms still finds them all.
    assert len(search(query="standup", **query)) == 9


def test_through_the_indexes_each_term_brings_a_bounded_number_of_matches(
    client_a, add_messages, settings, fresh_cache, monkeypatch
):
    monkeypatch.setattr(bm25, "TERM_MATCHES_CAP", 3)
    for n in range(6):
        make_message(client_a, "erin", f"weekly standup notes number {n}", add_messages)
        make_message(client_a, "erin", f"retro agenda item {n}", add_messages)
    for n in range(4):
        make_message(client_a, "erin", f"lunch menu of day {n}", add_messages)
    both = make_message(client_a, "erin", "standup and retro merged into one meeting", add_messages)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")
    settings.SEARCH_SCAN_MAX_ROWS = 0
    query = {"reader": client_a.reader, "memory_types": ["message"], "method": "bm25", "limit": 20, "filters": {}}
    assert len(search(query="standup", **query)) == 3  # of its 7 matches
    hits = search(query="standup retro", **query)
    # The item with both terms is found past each term's cap, and ranks first.
    assert hits[0].instance.pk == both.pk
    assert len(hits) <= 3 + 3 + 1


def test_odd_characters_in_a_query_are_searched_not_parsed(client_a, add_messages):
    text = "the path is C:\\temp\\notes and O'Brien's email is ob@example.com"
    stored = make_message(client_a, "dora", text, add_messages)
    for query in ("C:\\temp\\notes", "O'Brien's", "ob@example.com", "a & b | !c", "'", "\\"):
        hits = search(
            reader=client_a.reader,
            query=query,
            memory_types=["message"],
            method="bm25",
            limit=5,
            filters={"user_id": "dora"},
        )
        assert [hit.instance.pk for hit in hits] in ([stored.pk], []), query
    hits = search(
        reader=client_a.reader,
        query="O'Brien's C:\\temp",
        memory_types=["message"],
        method="hybrid",
        limit=5,
        filters={"user_id": "dora"},
    )
    assert hits[0].instance.pk == stored.pk


def test_a_search_statement_is_prepared_once_and_runs_its_generic_plan_with_the_same_results(
    client_a, corpus, settings
):
    query = {
        "reader": client_a.reader,
        "query": "Max retriever vet Lisbon",
        "memory_types": ["message"],
        "method": "hybrid",
        "limit": 5,
        "filters": {"user_id": "alice"},
    }
    settings.SEARCH_PREPARED_STATEMENTS = False
    plain = [(hit.instance.pk, round(hit.score, 9)) for hit in search(**query)]
    settings.SEARCH_PREPARED_STATEMENTS = True
    first = [(hit.instance.pk, round(hit.score, 9)) for hit in search(**query)]
    with CaptureQueriesContext(connection) as again:
        second = [(hit.instance.pk, round(hit.score, 9)) for hit in search(**query)]
    assert plain and plain == first == second
    sent = [captured["sql"] for captured in again.captured_queries]
    assert sent and all("EXECUTE search_" in sql and "PREPARE" not in sql for sql in sent)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements WHERE name LIKE 'search%%'"
        )
        generic, custom = cursor.fetchone()
    assert generic > 0 and custom == 0


def test_hits_are_the_orms_instances_field_for_field(client_a, corpus):
    """The engine builds its instances without Model.__init__ (apps.search.engine.rows._from_db):
    each kept hit, its session and its user equal what the ORM reads, field for field, saved and
    savable; a reranker's candidate defers what it did not read."""
    from apps.conversations.models import Message
    from apps.search.engine.planning import _merged

    asked = dict(
        reader=client_a.reader,
        query="retriever Max",
        memory_types=["message"],
        method="hybrid",
        limit=5,
        filters={"user_id": "alice"},
    )
    hits = search(**asked, reranker="context")
    assert hits
    for hit in hits:
        item = hit.instance
        orm = Message.objects.select_related("session", "end_user").get(pk=item.pk)
        fields = Message._meta.concrete_fields
        assert [getattr(item, f.attname) for f in fields if f.column not in ("embedding", "search_vector")] == [
            getattr(orm, f.attname) for f in fields if f.column not in ("embedding", "search_vector")
        ]
        assert item.session == orm.session and item.session.session_id == orm.session.session_id
        assert item._state.adding is False and item._state.db == "default"
        assert item.get_deferred_fields() == {"embedding", "search_vector"}
        item.save(update_fields=["metadata"])  # an instance the ORM can write back
    (candidate, *_) = _merged(**asked, candidate_rows=True)
    deferred = candidate.instance.get_deferred_fields()
    assert "metadata" in deferred and "content" not in deferred
    assert candidate.instance.metadata == Message.objects.get(pk=candidate.instance.pk).metadata  # loaded on use
