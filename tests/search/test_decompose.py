import pytest
from django.core.checks import run_checks

from apps.providers.models import LLMUsage
from apps.search.engine import search
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)
from tests.conftest import api_for

pytestmark = pytest.mark.django_db

TURNS = [
    "We adopted a puppy from the shelter, a beagle called Max.",
    "Max chews every shoe in the house.",
    "The weather was rainy all week.",
    "I bought a new harness and a leash for the walks.",
]
# No word of the question is in any turn: only its parts find them.
QUESTION = "What pet and pet gear did she get?"


@pytest.fixture
def turns(client_a, add_messages):
    add_messages(
        client_a, user_id="alice", session_id="pets", messages=[{"role": "user", "content": text} for text in TURNS]
    )


@pytest.fixture
def llm(fake_openai, settings):
    settings.LLM_PROVIDER, settings.QUERY_DECOMPOSER, settings.QUERY_DECOMPOSE_MAX = "openai", "llm", 3
    return fake_openai


def _search(client, query=QUESTION, user_id="alice", **options):
    return search(
        reader=client.reader,
        query=query,
        memory_types=["message"],
        method="bm25",
        limit=10,
        filters={"user_id": user_id},
        **options,
    )


def test_the_parts_of_a_question_find_what_the_question_alone_does_not(client_a, turns, llm):
    assert list(_search(client_a, decomposer="none")) == []
    llm.add_json({"queries": ["beagle puppy", "harness leash"]})
    hits = _search(client_a)
    assert hits.decomposed_into == ["beagle puppy", "harness leash"]
    assert [hit.instance.content for hit in hits] == [TURNS[0], TURNS[3]]
    (request,) = llm.chat_requests()
    assert (
        request["messages"][1]["content"] == f"Question: {QUESTION}"
        and "at most 3 queries" in request["messages"][0]["content"]
    )
    assert LLMUsage.objects.get(purpose="decompose").organization_id == client_a.organization_id


def test_an_item_found_by_several_parts_ranks_first_and_the_reranker_sees_the_fusion(client_a, turns, llm, settings):
    settings.RERANKER = "context"
    llm.add_json({"queries": ["rainy weather", "Max", "shoe"]})
    hits = _search(client_a, query="Max weather shoe")
    assert hits.reranked_by == "context" and hits.decomposed_into == ["rainy weather", "Max", "shoe"]
    assert hits[0].instance.content == TURNS[1]  # found by the question and two of its parts
    assert {hit.instance.content for hit in hits} == {TURNS[0], TURNS[1], TURNS[2]}


def test_the_models_queries_are_cleaned_and_capped(client_a, turns, llm, settings):
    settings.QUERY_DECOMPOSE_MAX = 2
    llm.add_json(
        {
            "queries": [
                QUESTION.upper(),
                7,
                None,
                {"q": "x"},
                "pup\ud800",
                "  beagle \x00 puppy ",
                "Beagle puppy",
                "",
                "leash",
                "shoe",
            ]
        }
    )
    hits = _search(client_a)
    # The question itself, non-strings, a lone surrogate, blanks and repeats are dropped; a NUL becomes a space; two are kept.
    assert hits.decomposed_into == ["beagle puppy", "leash"]


@pytest.mark.parametrize("answer", ["error", "garbage", "no list", "nothing usable"])
def test_a_failing_decomposer_leaves_the_plain_search_and_says_nothing_was_decomposed(client_a, turns, llm, answer):
    {
        "error": lambda: llm.add_error(500),
        "garbage": lambda: llm.add_text("beagle; leash"),
        "no list": lambda: llm.add_json({"queries": "beagle"}),
        "nothing usable": lambda: llm.add_json({"queries": [" Puppy  MAX", 3]}),
    }[answer]()
    hits = _search(client_a, query="puppy Max")
    plain = _search(client_a, query="puppy Max", decomposer="none")
    assert hits.decomposed_into is None
    assert [(hit.instance.pk, hit.score) for hit in hits] == [(hit.instance.pk, hit.score) for hit in plain]
    assert len(llm.chat_requests()) == 1  # a search does not wait for retries


def test_parts_are_searched_within_the_callers_organisation_scopes_and_user(
    client_a, foreign_client, turns, llm, add_messages
):
    add_messages(
        foreign_client, user_id="alice", session_id="pets", messages=[{"role": "user", "content": "Our beagle puppy"}]
    )
    add_messages(
        client_a, user_id="bob", session_id="pets", messages=[{"role": "user", "content": "Bob's beagle puppy"}]
    )
    llm.add_json({"queries": ["beagle puppy"]})
    hits = _search(client_a)
    assert [hit.instance.content for hit in hits] == [TURNS[0]]


def test_the_api_names_the_parts_and_no_llm_means_no_call(client_a, turns, llm, settings):
    llm.add_json({"queries": ["harness"]})
    body = (
        api_for(client_a)
        .post(
            "/api/v1/memory/search", {"user_id": "alice", "query": QUESTION, "memory_types": ["message"]}, format="json"
        )
        .json()
    )
    assert body["decomposed_into"] == ["harness"] and [result["content"] for result in body["results"]] == [TURNS[3]]
    listing = api_for(client_a).post("/api/v1/memory/search", {"user_id": "alice", "query": ""}, format="json").json()
    assert listing["decomposed_into"] is None  # no question, nothing to decompose
    settings.LLM_PROVIDER = "rules"
    body = (
        api_for(client_a).post("/api/v1/memory/search", {"user_id": "alice", "query": QUESTION}, format="json").json()
    )
    assert body["decomposed_into"] is None and len(llm.chat_requests()) == 1


def test_checks_refuse_an_unknown_decomposer_and_warn_without_an_llm(settings):
    settings.QUERY_DECOMPOSER = "magic"
    assert [message.msg for message in run_checks() if message.id == "platform.E001"] == [
        "QUERY_DECOMPOSER='magic' is not valid; use one of none, llm."
    ]
    settings.QUERY_DECOMPOSER, settings.LLM_PROVIDER = "llm", "rules"
    assert [message.id for message in run_checks() if message.id.startswith("search.")] == ["search.W001"]
