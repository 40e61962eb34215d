"""POST memory/context: the block within its budget, in a fixed order, every line citable."""

import pytest

from apps.pipeline.models import MemoryTask
from apps.providers.tokens import estimate_tokens
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.memories.makers import episodic, semantic
from tests.profiles.conftest import conversation, pages, rules, run_tasks  # noqa: F401  (shared fixtures)
from tests.skills.makers import make_skill

pytestmark = pytest.mark.django_db

URL = "/api/v1/memory/context"


def context(api, **body):
    response = api.post(URL, {"user_id": "caroline", **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_block_never_exceeds_the_budget(pages, api, client_a):
    semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline moved from Sweden four years ago.")
    episodic(client_a.organization, "default", "caroline", "Caroline went to a support group.", actor="Caroline")
    for max_tokens in (64, 65, 80, 100, 150, 233, 500, 1000, 2000, 8000):
        body = context(api, query="What did Jon help Caroline with?", max_tokens=max_tokens)
        assert body["tokens"] == estimate_tokens(body["text"]) <= max_tokens, max_tokens
        assert body["max_tokens"] == max_tokens and body["items"]


def test_sections_come_in_order_and_every_line_names_its_item(pages, api, client_a):
    semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline plans to adopt a child.")
    episodic(
        client_a.organization,
        "default",
        "caroline",
        "Caroline filled in the adoption forms with Jon.",
        actor="Caroline",
    )
    body = context(
        api, messages=[{"role": "user", "content": "Who helped Caroline with the adoption forms?"}], max_tokens=2000
    )
    assert body["query"] == "Who helped Caroline with the adoption forms?"
    headings = [line for line in body["text"].splitlines() if line.startswith("## ")]
    assert headings[0] == "## About the user"
    order = ["## About the user", "## People", "## Facts", "## Events", "## Earlier conversation"]
    assert headings == [heading for heading in order if heading in headings]
    assert {"## Facts", "## Events", "## Earlier conversation"} <= set(headings)
    for item in body["items"]:
        assert f"[{item['ref']}] {item['text']}" in body["text"]
    assert [item["ref"] for item in body["items"]] == list(range(1, len(body["items"]) + 1))
    user_page = body["items"][0]
    assert (user_page["section"], user_page["memory_type"], user_page["id"]) == (
        "user",
        "profile",
        str(pages["Caroline"].pk),
    )
    turns = [item for item in body["items"] if item["memory_type"] == "message"]
    assert any("Jon helped me with the forms" in item["text"] for item in turns)
    assert turns == sorted(turns, key=lambda item: (item["occurred_at"], item["session_id"], item["seq"]))
    assert all(item["session_id"] == "chat-1" and item["seq"] for item in turns)


def test_memory_types_limit_what_is_used(pages, api):
    body = context(api, query="Jon forms", memory_types=["message"])
    assert body["items"] and {item["memory_type"] for item in body["items"]} == {"message"}


def test_a_task_session_gets_its_top_skills(api, client_a, add_messages):
    make_skill(client_a, "caroline", "Book a flight: search fares, hold the seat, then pay")
    add_messages(
        client_a,
        user_id="caroline",
        session_id="job-1",
        session_tag="task",
        messages=[{"role": "user", "content": "Book me a flight to Oslo"}],
    )
    body = context(api, session_id="job-1", messages=[{"role": "user", "content": "Book me a flight to Oslo"}])
    assert body["session_id"] == "job-1"
    skills = [item for item in body["items"] if item["section"] == "skills"]
    assert skills and "Book a flight" in skills[0]["text"] and "## Skills for this task" in body["text"]
    conversation_body = context(api, messages=[{"role": "user", "content": "Book me a flight to Oslo"}])
    assert not any(item["section"] == "skills" for item in conversation_body["items"])


def test_a_read_only_client_may_ask_and_sees_only_its_scopes(pages, client_a):
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    assert context(api_for(reader), query="Jon")["items"]
    stranger = ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other"])
    assert context(api_for(stranger), query="Jon")["items"] == []
    assert context(api_for(stranger), query="Jon")["text"] == ""
    assert not MemoryTask.objects.filter(task_type="delete_session").exists()


@pytest.mark.parametrize(
    "body,field",
    [
        ({"max_tokens": 10}, "max_tokens"),
        ({"max_tokens": 10**9}, "max_tokens"),
        ({"memory_types": ["skills"]}, "memory_types"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ({"session_id": "s1", "scope": "no such scope!"}, "scope"),
        ({"session_id": "no such/session"}, "session_id"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, body, field):
    response = api.post(URL, {"user_id": "caroline", **body}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["message"]


def test_query_wins_over_messages(pages, api):
    body = context(api, query="Yosemite camping", messages=[{"role": "user", "content": "adoption forms"}])
    assert body["query"] == "Yosemite camping"


def test_an_unknown_session_is_a_404(api):
    response = api.post(URL, {"user_id": "caroline", "session_id": "nope"}, format="json")
    assert response.status_code == 404


def test_a_time_named_in_the_query_is_shown_with_what_was_done(pages, api, client_a, settings):
    settings.SEARCH_TIME_WINDOW = "filter"
    episodic(client_a.organization, "default", "caroline", "Caroline went to a support group.", actor="Caroline")
    body = context(api, query="What did Caroline do in May 2023?")
    assert body["time_window"] == {
        "expression": "in May 2023",
        "start": "2023-05-01",
        "end": "2023-05-31",
        "mode": "filter",
    }
    assert any("support group" in item["text"] for item in body["items"])  # it happened on 7 May 2023
    assert context(api, query="What did Caroline do in 2019?")["time_window"]["start"] == "2019-01-01"
    assert context(api, query="What did Caroline do?")["time_window"] is None
