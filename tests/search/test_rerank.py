from datetime import datetime, timezone

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.conversations.models import Message
from apps.providers.models import LLMUsage
from apps.search.engine import search
from apps.search.rerank import Candidate, context_scores
from apps.search.rerank import rerank as engine_rerank
from apps.search.serializers import render_hit
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)

pytestmark = pytest.mark.django_db

TURNS = [
    "We adopted a puppy from the shelter, a beagle called Max.",
    "Max chews every shoe in the house.",
    "The weather was rainy all week.",
    "I bought a new puppy harness and a leash for the walks.",
]


@pytest.fixture
def turns(client_a, add_messages):
    add_messages(
        client_a, user_id="alice", session_id="pets", messages=[{"role": "user", "content": text} for text in TURNS]
    )


def _search(client, reranker, query="puppy harness leash", limit=10):
    return search(
        reader=client.reader,
        query=query,
        memory_types=["message"],
        method="bm25",
        limit=limit,
        filters={"user_id": "alice"},
        reranker=reranker,
    )


def test_context_lifts_a_turn_whose_neighbours_and_session_match_above_an_isolated_one():
    when = datetime(2023, 5, 8, tzinfo=timezone.utc)
    isolated = Candidate(text="a", score=1.0, session="s1", position=10, occurred_at=when)
    answer = Candidate(text="b", score=0.9, session="s2", position=3, occurred_at=when)
    neighbour = Candidate(text="c", score=0.8, session="s2", position=4, occurred_at=when)
    far = Candidate(text="d", score=0.8, session="s3", position=1, occurred_at=when)
    scores = context_scores("what did she buy?", [isolated, answer, neighbour, far])
    assert scores[1] > scores[0]  # its neighbour and session match too
    assert scores[2] > scores[3]  # same fused score: the one with context wins
    assert scores[0] >= 1.0 and scores[3] >= 0.8  # context only adds


def test_context_lifts_the_session_of_the_month_and_year_the_question_names():
    may = Candidate(
        text="a", score=0.5, session="s1", position=1, occurred_at=datetime(2023, 5, 8, tzinfo=timezone.utc)
    )
    june = Candidate(
        text="b", score=0.6, session="s2", position=1, occurred_at=datetime(2023, 6, 8, tzinfo=timezone.utc)
    )
    may_scores = context_scores("what did Caroline do in May 2023?", [may, june])
    assert may_scores[0] > may_scores[1]
    assert context_scores("may I ask what she did?", [may, june]) == [0.5 / 0.6, 1.0]  # "may" the verb is no month


def test_no_reranker_keeps_the_fused_order_and_says_so(client_a, turns, settings):
    settings.RERANKER = "none"
    hits = _search(client_a, None)
    assert hits.reranked_by is None and hits[0].instance.content == TURNS[3]


def test_the_context_reranker_orders_the_search_and_is_named_in_the_response(api, client_a, turns, settings):
    settings.RERANKER, settings.RERANK_CANDIDATES = "context", 30
    fused = _search(client_a, "none")
    reranked = _search(client_a, None)
    assert reranked.reranked_by == "context"
    assert sorted(hit.instance.pk for hit in reranked) == sorted(hit.instance.pk for hit in fused)
    assert [hit.score for hit in reranked] == sorted((hit.score for hit in reranked), reverse=True)
    body = api.post(
        "/api/v1/memory/search",
        {"user_id": "alice", "query": "puppy harness leash", "memory_types": ["message"]},
        format="json",
    ).json()
    assert body["reranked_by"] == "context" and body["count"] == 2  # the turns with "puppy" (not embedded yet)
    listing = api.post("/api/v1/memory/search", {"user_id": "alice", "query": ""}, format="json").json()
    assert listing["reranked_by"] is None  # no query, nothing to rerank


def test_reranking_sees_rerank_candidates_even_for_a_small_limit(client_a, turns, fake_openai, settings):
    settings.LLM_PROVIDER, settings.RERANK_CANDIDATES = "openai", 30
    fused = _search(client_a, "none", query="puppy Max shoe")
    fake_openai.add_json({"ranking": [3]})
    (hit,) = _search(client_a, "llm", query="puppy Max shoe", limit=1)
    (request,) = fake_openai.chat_requests()
    assert request["messages"][1]["content"].count("\n[") == 3  # all three matches were shown, not just one
    assert hit.instance.pk == fused[2].instance.pk and hit.score == 1.0


def test_the_llm_reranker_reorders_by_the_models_ranking(client_a, turns, fake_openai, settings):
    settings.LLM_PROVIDER = "openai"
    fused = _search(client_a, "none", query="puppy Max shoe")
    fake_openai.add_json({"ranking": [3, 99, "1", 3, True]})  # unknown, non-integer and repeated numbers are ignored
    reranked = _search(client_a, "llm", query="puppy Max shoe")
    assert reranked.reranked_by == "llm"
    assert [hit.instance.pk for hit in reranked] == [fused[2].instance.pk, fused[0].instance.pk, fused[1].instance.pk]
    assert [hit.score for hit in reranked] == [1.0, 0.0, 0.0]
    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert prompt.startswith("Question: puppy Max shoe") and "[3] " in prompt and fused[2].instance.content in prompt
    assert LLMUsage.objects.get(purpose="rerank").organization_id == client_a.organization_id


@pytest.mark.parametrize("answer", ["error", "garbage", "no ranking"])
def test_a_failing_llm_reranker_keeps_the_fused_order_and_says_nothing_was_reranked(
    client_a, turns, fake_openai, settings, answer
):
    settings.LLM_PROVIDER = "openai"
    fused = _search(client_a, "none", query="puppy Max shoe")
    {
        "error": lambda: fake_openai.add_error(500),
        "garbage": lambda: fake_openai.add_text("ranked: 3, 1"),
        "no ranking": lambda: fake_openai.add_json({"order": [3]}),
    }[answer]()
    hits = _search(client_a, "llm", query="puppy Max shoe")
    assert hits.reranked_by is None
    assert [(hit.instance.pk, hit.score) for hit in hits] == [(hit.instance.pk, hit.score) for hit in fused]
    assert len(fake_openai.chat_requests()) == 1  # a search does not wait for retries


def _many_turns(client, add_messages, count=30):
    add_messages(
        client,
        user_id="alice",
        session_id="walks",
        messages=[{"role": "user", "name": "Alice", "content": f"puppy walk number {n}"} for n in range(count)],
    )


def test_a_reranked_search_reads_what_the_reranker_needs_of_its_candidates_and_only_the_kept_hits_in_full(
    client_a, add_messages, settings
):
    settings.RERANKER, settings.RERANK_CANDIDATES = "context", 30
    _many_turns(client_a, add_messages)
    _search(client_a, None, query="puppy walk", limit=3)  # the corpus statistics are cached
    with CaptureQueriesContext(connection) as queries:
        hits = _search(client_a, None, query="puppy walk", limit=3)
        rendered = [render_hit(hit) for hit in hits]
    candidates, completion = (query["sql"] for query in queries.captured_queries)
    assert "r0." not in candidates and "t.metadata" not in candidates  # no related rows, no unused columns
    assert "= ANY(" in completion and completion.count("LATERAL") == 2  # the kept hits, with session and user
    assert len(hits) == 3 and all(hit.instance.session.session_id == "walks" for hit in hits)
    full = {str(hit.instance.pk): render_hit(hit) for hit in _search(client_a, "none", query="puppy walk", limit=30)}
    assert rendered == [{**full[item["id"]], "score": item["score"]} for item in rendered]  # every field, as unreranked


def test_a_candidate_deleted_before_the_kept_hits_are_read_is_left_out(client_a, add_messages, settings, monkeypatch):
    settings.RERANKER, settings.RERANK_CANDIDATES = "context", 30
    _many_turns(client_a, add_messages)
    reranked_first = _search(client_a, None, query="puppy walk", limit=3)[0].instance.pk

    def deleted_while_reranking(query, hits, **options):
        Message.objects.filter(pk=reranked_first).delete()
        return engine_rerank(query, hits, **options)

    monkeypatch.setattr("apps.search.engine.planning.rerank", deleted_while_reranking)
    hits = _search(client_a, None, query="puppy walk", limit=3)
    assert reranked_first not in {hit.instance.pk for hit in hits} and len(hits) == 2


def test_result_rows_read_the_same_datetimes_as_the_orm(client_a, add_messages, settings):
    settings.RERANKER = "context"
    _many_turns(client_a, add_messages, count=3)
    for hit in _search(client_a, None, query="puppy walk") + _search(client_a, "none", query="puppy walk"):
        stored = Message.objects.select_related("session", "end_user").get(pk=hit.instance.pk)
        for instance, orm in [(hit.instance, stored), (hit.instance.session, stored.session)]:
            for field in ("created_at", "updated_at"):
                assert getattr(instance, field) == getattr(orm, field)
                assert getattr(instance, field).isoformat() == getattr(orm, field).isoformat()
        assert hit.instance.occurred_at.utcoffset().total_seconds() == 0
