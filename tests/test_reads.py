"""Reads never fail on what the platform itself stored (issue 17).

Every edge a write accepts (the first and last instants of the date window at the extreme UTC
offsets, astral and combining characters, the longest ids and texts) is stored through the API,
the background work runs on it, and then every read path answers 200 and returns it.
"""

import pytest
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.search.registry import METHODS, SOURCES
from tests.conftest import api_for
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

EDGE_DATES = [
    "1900-01-01T00:00:00+23:59",
    "1900-01-01T00:00:00-23:59",
    "2199-12-31T23:59:59-23:59",
    "2199-12-31T23:59:59+23:59",
    "1970-01-01T00:00:00Z",
    "2024-02-29T12:00:00.999999+05:45",
    "2038-01-19T03:14:08",
]
USER_ID = "ü" * 255
SESSION_ID = "S" * 64
TEXTS = [
    "Zoë met 王小明 in Kraków 🎉 (family: 👨‍👩‍👧) — e\u0301 combining",
    "\U0010fffd plane-16 private use and 𝄞 musical symbol",
    "tabs\tand\nnewlines\r\n and a backslash \\ and quotes \"'",
    "x" * 32000,
]


@pytest.fixture
def stored(db):
    client = ClientFactory(can_erase=True)
    api = api_for(client)
    messages = [
        {
            "role": "user",
            "content": f"{TEXTS[index % len(TEXTS)]} on {date}",
            "occurred_at": date,
            "metadata": {"date": date, "deep": {"a": [{"b": ["ü", 1.5e308, -(2**63), None, True]}]}},
        }
        for index, date in enumerate(EDGE_DATES)
    ]
    messages.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c" * 255, "type": "function", "function": {"name": "lookup_🎉", "arguments": '{"q": "王"}'}}
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": "c" * 255, "content": "found 王小明"})
    for session_id, occurred_at, tag in [
        (SESSION_ID, "1900-01-01T00:00:00+23:59", "conversation"),
        ("task-1", "2199-12-31T23:59:59-23:59", "task"),
    ]:
        response = api.post(
            "/api/v1/memory/add",
            {
                "user_id": USER_ID,
                "session_id": session_id,
                "session_tag": tag,
                "messages": messages,
                "occurred_at": occurred_at,
                "filter_tags": {"team": "王", "n": 2**62},
                "seal": True,
                "outcome": "success",
            },
            format="json",
        )
        assert response.status_code == 202, response.content
    # The background work (embedding, extraction, projection, distillation) runs on what was stored.
    for _ in range(3):
        MemoryTask.objects.filter(status=MemoryTask.Status.QUEUED).update(run_after=timezone.now())
        for task_id in MemoryTask.objects.filter(status=MemoryTask.Status.QUEUED).values_list("pk", flat=True):
            task_execute(task_id=task_id, worker="test")
    failed = MemoryTask.objects.exclude(status=MemoryTask.Status.SUCCEEDED).values_list("task_type", "status", "error")
    assert not list(failed)
    return client, api


def test_the_transcript_reads_back_every_edge(stored):
    _, api = stored
    response = api.get(f"/api/v1/sessions/{SESSION_ID}/", {"user_id": USER_ID, "limit": 1000})
    assert response.status_code == 200, response.content
    turns = response.json()["messages"]
    assert [turn["occurred_at"] for turn in turns[: len(EDGE_DATES)]] == [
        "1899-12-31T00:01:00Z",
        "1900-01-01T23:59:00Z",
        "2200-01-01T23:58:59Z",
        "2199-12-31T00:00:59Z",
        "1970-01-01T00:00:00Z",
        "2024-02-29T06:15:00.999999Z",
        "2038-01-19T03:14:08Z",
    ]
    assert turns[0]["content"].startswith(TEXTS[0]) and turns[0]["metadata"]["deep"]["a"][0]["b"][2] == -(2**63)
    assert response.json()["filter_tags"]["team"] == "王"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("query", ["王小明 Kraków", "", "musical"])
def test_every_search_method_reads_every_type(stored, method, query):
    _, api = stored
    for memory_type in SOURCES:
        response = api.post(
            "/api/v1/memory/search",
            {
                "user_id": USER_ID,
                "query": query,
                "search_method": method,
                "memory_types": [memory_type],
                "limit": 100,
            },
            format="json",
        )
        assert response.status_code == 200, (memory_type, response.content[:300])
    response = api.get(
        "/api/v1/memory/search",
        {
            "user_id": USER_ID,
            "query": query,
            "search_method": method,
            "start": "1900-01-01T00:00:00+23:59",
            "end": "2199-12-31T23:59:59-23:59",
        },
    )
    assert response.status_code == 200 and response.json()["count"] > 0
    response = api.get("/api/v1/memory/search_all_users", {"query": query, "search_method": method, "limit": 100})
    assert response.status_code == 200 and response.json()["count"] > 0


def test_the_lists_and_retrieval_read_every_edge(stored):
    _, api = stored
    for path, params in [
        ("/api/v1/sessions/", {"user_id": USER_ID, "start": "1900-01-01T00:00:00+23:59"}),
        ("/api/v1/skills/", {"user_id": USER_ID}),
        ("/api/v1/experiences/", {"user_id": USER_ID, "session_id": "task-1"}),
        ("/api/v1/profiles/", {"user_id": USER_ID}),
        ("/api/v1/entities/", {"user_id": USER_ID}),
    ]:
        response = api.get(path, params)
        assert response.status_code == 200, (path, response.content[:300])
    assert api.get("/api/v1/sessions/", {"user_id": USER_ID}).json()["count"] == 2
    response = api.post(
        "/api/v1/skills/retrieve", {"task": "lookup 王小明", "k": 50, "user_id": USER_ID}, format="json"
    )
    assert response.status_code == 200


def test_the_admin_pages_read_every_edge(stored, admin_client):
    session = Session.objects.get(session_id=SESSION_ID)
    message = Message.objects.filter(session=session).order_by("seq").first()
    pages = [
        "/admin/",
        "/admin/conversations/session/",
        f"/admin/conversations/session/{session.pk}/change/",
        f"/admin/conversations/session/{session.pk}/transcript/",
        "/admin/conversations/session/?q=" + SESSION_ID,
        "/admin/skills/skill/",
        "/admin/skills/skillexperience/",
        "/admin/memories/episodicmemory/",
        "/admin/memories/semanticmemory/",
        "/admin/profiles/profile/",
        "/admin/profiles/entity/",
        "/admin/pipeline/memorytask/",
    ]
    for page in pages:
        assert admin_client.get(page).status_code == 200, page
    transcript = admin_client.get(f"/admin/conversations/session/{session.pk}/transcript/").content.decode()
    assert message.content[:20] in transcript
