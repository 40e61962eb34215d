"""apps/core/pagination.py: limit/offset on every list endpoint, with page_size/page as aliases."""

import pytest

from tests.conftest import api_for
from tests.skills.factories import ExperienceFactory, SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(client_a, add_messages):
    for number in range(7):
        add_messages(client_a, "u1", f"s{number}", [{"role": "user", "content": f"turn {number}"}])


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item.get("session_id") or item["id"] for item in response.json()["results"]]


def test_page_size_and_page_walk_the_same_pages_as_limit_and_offset(api, sessions):
    everything = ids(api.get("/api/v1/sessions/?limit=100"))
    assert len(everything) == 7

    assert ids(api.get("/api/v1/sessions/?page_size=3")) == everything[:3]
    assert (
        ids(api.get("/api/v1/sessions/?page_size=3&page=2"))
        == everything[3:6]
        == ids(api.get("/api/v1/sessions/?limit=3&offset=3"))
    )
    assert ids(api.get("/api/v1/sessions/?limit=3&page=3")) == everything[6:]
    assert ids(api.get("/api/v1/sessions/?page_size=3&page=9")) == []


def test_links_use_limit_and_offset_whichever_spelling_was_asked(api, sessions):
    body = api.get("/api/v1/sessions/?page_size=3&page=2&user_id=u1").json()
    assert "limit=3" in body["next"] and "offset=6" in body["next"] and "user_id=u1" in body["next"]
    assert "page" not in body["next"] and "page" not in body["previous"]
    assert ids(api.get(body["next"])) == ids(api.get("/api/v1/sessions/?limit=3&offset=6"))


@pytest.mark.parametrize(
    "query, field",
    [
        ("page_size=3&limit=4", "page_size"),
        ("page=2&offset=3", "page"),
        ("page=0", "page"),
        ("page_size=0", "page_size"),
        ("page_size=501", "page_size"),
        ("limit=501", "limit"),
        ("offset=-1", "offset"),
        ("offset=100000000000000000000", "offset"),
        ("pagesize=3", "pagesize"),
    ],
)
def test_contradictory_or_out_of_range_paging_is_a_400_naming_the_parameter(api, query, field):
    for path in ("sessions/", "skills/", "experiences/"):
        response = api.get(f"/api/v1/{path}?{query}")
        assert response.status_code == 400, (path, query, response.content)
        assert field in response.json()["error"]["details"], (path, query, response.json())


def test_skills_and_experiences_accept_the_aliases(client_a):
    for number in range(3):
        SkillFactory(organization=client_a.organization, name=f"skill-{number}")
        ExperienceFactory(organization=client_a.organization)
    api = api_for(client_a)
    for path in ("skills/", "experiences/"):
        everything = ids(api.get(f"/api/v1/{path}?limit=10"))
        assert len(everything) == 3
        assert ids(api.get(f"/api/v1/{path}?page_size=2&page=2")) == everything[2:]
