"""GET profiles/, profiles/<id>/ and entities/: the caller's organisation and read scopes only."""

import pytest

from apps.profiles.models import Entity, Profile
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def pages(conversation, rules):
    session_project(session=conversation)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    return {profile.name: profile for profile in Profile.objects.all()}


def test_profiles_are_listed_per_user_with_their_sources(pages, api, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        body = api.get("/api/v1/profiles/?user_id=caroline").json()
    assert body["count"] == len(pages) == 4
    melanie = next(item for item in body["results"] if item["name"] == "Melanie")
    assert melanie["user_id"] == "caroline" and melanie["status"] == "active" and melanie["revision"] == 1
    assert melanie["markdown"] == pages["Melanie"].markdown
    assert {source["item_id"] for source in melanie["sources"]} == {
        str(source.item_id) for source in pages["Melanie"].sources.all()
    }
    assert api.get("/api/v1/profiles/?user_id=someone-else").json()["count"] == 0


def test_a_profile_shows_its_text_revisions_and_quoted_sources(pages, api, django_assert_max_num_queries):
    profile = pages["Caroline"]
    with django_assert_max_num_queries(6):
        response = api.get(f"/api/v1/profiles/{profile.pk}/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["markdown"] == profile.markdown
    (revision,) = body["revisions"]
    assert (revision["number"], revision["model"]) == (1, "rules")
    assert {source["quote"] for source in body["sources"]} == {source["quote"] for source in revision["sources"]}
    assert all(source["quote"].split(" … ")[0] in body["markdown"] for source in body["sources"])


def test_entities_come_with_their_edges(pages, api, django_assert_max_num_queries):
    with django_assert_max_num_queries(7):  # with the tenancy generation, the key and its last-used time
        response = api.get("/api/v1/entities/?user_id=caroline")
    assert response.status_code == 200, response.content
    entities = {item["name"]: item for item in response.json()["results"]}
    assert set(entities) == {"Caroline", "Melanie", "Jon", "Yosemite"}
    assert entities["Yosemite"]["kind"] == "place"
    jon_edges = {edge["name"]: edge for edge in entities["Jon"]["edges"]}
    assert jon_edges["Caroline"]["weight"] == 2 and len(jon_edges["Caroline"]["evidence"]) == 2
    assert api.get("/api/v1/entities/").status_code == 400  # user_id is required
    assert "user_id" in api.get("/api/v1/entities/").json()["error"]["details"]


def test_another_scope_of_the_organisation_sees_nothing(pages, client_a):
    other = api_for(ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other"]))
    assert other.get("/api/v1/profiles/?user_id=caroline").json()["count"] == 0
    assert other.get("/api/v1/entities/?user_id=caroline").json()["count"] == 0
    response = other.get(f"/api/v1/profiles/{pages['Jon'].pk}/")
    assert response.status_code == 404


def test_profiles_are_found_by_the_search_api_with_their_sources(pages, api):
    response = api.post(
        "/api/v1/memory/search",
        {
            "user_id": "caroline",
            "query": "what does Melanie love",
            "memory_types": ["profile"],
            "search_method": "bm25",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    (first, *_) = response.json()["results"]
    assert first["memory_type"] == "profile" and first["name"] == "Melanie"
    assert first["sources"] and all({"item_type", "item_id"} == set(source) for source in first["sources"])


def test_among_other_types_a_search_keeps_only_the_best_profile_page(pages, api, settings):
    """Every page naming Jon matches "Jon"; among the turns, only the best page is kept."""
    query = {"user_id": "caroline", "query": "Jon Yosemite Melanie Caroline", "search_method": "bm25", "limit": 10}

    def types_of(memory_types):
        response = api.post("/api/v1/memory/search", {**query, "memory_types": memory_types}, format="json")
        assert response.status_code == 200, response.content
        return [hit["memory_type"] for hit in response.json()["results"]]

    assert types_of(["profile"]).count("profile") >= 3  # alone, every matching page
    mixed = types_of(["message", "profile"])
    assert mixed.count("profile") == 1 and mixed.count("message") >= 5

    settings.SEARCH_PROFILE_HITS = 2
    assert types_of(["message", "profile"]).count("profile") == 2
