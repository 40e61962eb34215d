import pytest

from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.search.makers import make_message

pytestmark = pytest.mark.django_db


def test_post_and_get_search_return_results_with_fields(api, client_a, add_messages):
    add_messages(
        client_a,
        user_id="alice",
        session_id="trip",
        messages=[
            {
                "role": "user",
                "content": "My sister lives in Lisbon",
                "metadata": {"dia_id": "D1:3", "tags": ["family"]},
            },
        ],
    )
    body = api.post(
        "/api/v1/memory/search",
        {"user_id": "alice", "query": "sister Lisbon", "memory_types": ["message"], "search_method": "bm25"},
        format="json",
    ).json()
    assert body["count"] == 1
    result = body["results"][0]
    assert result["memory_type"] == "message" and result["content"] == "My sister lives in Lisbon"
    # The item's own fields, its JSON decoded, and those of its session and user.
    assert result["metadata"] == {"dia_id": "D1:3", "tags": ["family"]}
    assert result["session_id"] == "trip" and result["session_tag"] == "conversation" and result["user_id"] == "alice"
    assert {"id", "score", "occurred_at", "role", "seq"} <= set(result) and result["score"] > 0
    got = api.get("/api/v1/memory/search?user_id=alice&query=sister&memory_types=message&search_method=bm25").json()
    assert got["results"][0]["id"] == result["id"]


def test_search_all_users_spans_users_but_not_scopes(api, client_a, add_messages):
    make_message(client_a, "alice", "retriever puppy", add_messages)
    make_message(client_a, "bob", "retriever training", add_messages)
    other_scope = ClientFactory(organization=client_a.organization, write_scope="other")
    make_message(other_scope, "carol", "retriever show", add_messages)
    body = api.get("/api/v1/memory/search_all_users?query=retriever&search_method=bm25").json()
    assert sorted(result["user_id"] for result in body["results"]) == ["alice", "bob"]
    assert (
        api_for(other_scope).get("/api/v1/memory/search_all_users?query=retriever&search_method=bm25").json()["count"]
        == 1
    )


@pytest.mark.parametrize(
    "params,field",
    [
        ({"query": "x"}, "user_id"),
        ({"user_id": "a", "memory_types": ["bogus"]}, "memory_types.0"),
        ({"user_id": "a", "search_method": "magic"}, "search_method"),
        ({"user_id": "a", "limit": 101}, "limit"),
        ({"user_id": "a", "limit": 0}, "limit"),
        ({"user_id": "a", "filter_tags": "notjson"}, "filter_tags"),
        ({"user_id": "a", "start": "yesterday"}, "start"),
        ({"user_id": "a", "colour": "red"}, "colour"),
        ({"user_id": "a", "time_window": "sometimes"}, "time_window"),
    ],
)
def test_bad_search_input_names_the_field(api, params, field):
    response = api.post("/api/v1/memory/search", params, format="json")
    assert response.status_code == 400
    assert f"{field}:" in response.json()["error"]["message"]


def test_an_end_before_the_start_is_an_empty_window(api, client_a, add_messages):
    make_message(client_a, "alice", "My sister lives in Lisbon", add_messages)
    window = {"user_id": "alice", "query": "", "start": "2199-01-01T00:00:00Z", "end": "1900-01-01T00:00:00Z"}
    response = api.post("/api/v1/memory/search", window, format="json")
    assert response.status_code == 200 and response.json()["count"] == 0
    del window["start"]
    assert api.post("/api/v1/memory/search", window, format="json").json()["count"] == 0
    window["end"] = "2199-01-01T00:00:00Z"
    assert api.post("/api/v1/memory/search", window, format="json").json()["count"] == 1


def test_search_requires_a_key(client):
    assert client.get("/api/v1/memory/search?user_id=a").status_code == 401


def test_a_read_only_client_may_search_with_post(client_a, add_messages):
    make_message(client_a, "alice", "My sister lives in Lisbon", add_messages)
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    response = api_for(reader).post("/api/v1/memory/search", {"user_id": "alice", "query": "Lisbon"}, format="json")
    assert response.status_code == 200
    assert response.json()["count"] == 1
