import pytest
from django.test import override_settings
from django.utils import timezone

from apps.conversations.models import IngestRequest, Message, Session
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.fixtures import tau_trajectories

pytestmark = pytest.mark.django_db


def add(api, **body):
    body.setdefault("user_id", "user-1")
    body.setdefault("session_id", "s1")
    body.setdefault("messages", [{"role": "user", "content": "hello"}])
    return api.post("/api/v1/memory/add", body, format="json")


def test_add_stores_turns_and_enqueues_embedding_after_commit(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = add(api, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello!"}])
    assert response.status_code == 202
    body = response.json()
    assert body["messages_stored"] == 2 and body["messages_truncated"] == 0
    assert body["session_tag"] == "conversation" and body["status"] == "open"
    tasks = {task.task_type: task for task in MemoryTask.objects.filter(pk__in=body["task_ids"])}
    assert set(tasks) == {"embed_messages", "extract_memories", "project_entities"}  # extracted and projected
    session = Session.objects.get()
    assert tasks["embed_messages"].payload == {"session": str(session.pk), "from_seq": 1, "to_seq": 2}
    assert tasks["extract_memories"].payload == {"session": str(session.pk)}
    assert len(callbacks) == 3  # the publishes happen on commit, not before
    assert list(Message.objects.order_by("seq").values_list("seq", "role", "content")) == [
        (1, "user", "hi"),
        (2, "assistant", "hello!"),
    ]
    assert Message.objects.filter(embedding__isnull=True).count() == 2  # never embedded in the request


def test_a_real_trajectory_round_trips_through_the_transcript(api):
    trajectory = tau_trajectories()[0]["traj"]
    response = add(api, session_id="tau-0", session_tag="task", messages=trajectory, outcome="failure")
    assert response.status_code == 202, response.content
    transcript = api.get("/api/v1/sessions/tau-0/?user_id=user-1&limit=1000").json()
    assert transcript["message_count"] == len(trajectory) == len(transcript["messages"])
    for sent, stored in zip(trajectory, transcript["messages"]):
        assert stored["role"] == sent["role"]
        if sent["role"] == "tool":
            assert stored["name"] == sent["name"]
            assert stored["content"] == f"[{sent['name']}] {sent['content']}"
        if sent.get("tool_calls"):
            assert [call["function"] for call in stored["tool_calls"]] == [
                call["function"] for call in sent["tool_calls"]
            ]
            assert sent["tool_calls"][0]["function"]["name"] in stored["content"]
        elif sent["content"]:
            assert stored["content"].endswith(sent["content"])
    assert [message["seq"] for message in transcript["messages"]] == list(range(1, len(trajectory) + 1))


def test_metadata_and_filter_tags_scope_is_forced(api):
    add(
        api,
        filter_tags={"scope": "someone-else", "team": "x"},
        messages=[{"role": "user", "content": "a", "metadata": {"dia_id": "D1:3"}}],
    )
    session = api.get("/api/v1/sessions/s1/?user_id=user-1").json()
    assert session["filter_tags"] == {"scope": "default", "team": "x"}
    assert session["messages"][0]["metadata"] == {"dia_id": "D1:3"}


def test_idempotency_key_replays_and_conflicts(api):
    first = api.post(
        "/api/v1/memory/add",
        {"user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "a"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    replay = api.post(
        "/api/v1/memory/add",
        {"user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "a"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    assert first.status_code == replay.status_code == 202
    assert first.json() == replay.json()
    assert Message.objects.count() == 1 and MemoryTask.objects.count() == len(first.json()["task_ids"]) == 3
    other = api.post(
        "/api/v1/memory/add",
        {"user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "b"}]},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    assert other.status_code == 409
    assert "Idempotency-Key" in other.json()["error"]["message"]
    assert Message.objects.count() == 1 and IngestRequest.objects.count() == 1


def test_sealing_on_add_by_endpoint_and_conflict_after(api):
    assert add(api, session_id="a", seal=True).json()["status"] == "sealed"
    response = add(api, session_id="a")
    assert response.status_code == 409
    assert "sealed" in response.json()["error"]["message"]

    add(api, session_id="b")
    sealed = api.post("/api/v1/sessions/b/seal?user_id=user-1")
    assert sealed.status_code == 200 and sealed.json()["session"]["status"] == "sealed"
    assert Message.objects.filter(session__session_id="b").count() == 1


def test_a_newer_session_seals_older_open_sessions_of_the_same_tag_only(api):
    add(api, session_id="conv-1")
    add(api, session_id="task-1", session_tag="task")
    add(api, session_id="conv-2")
    states = dict(Session.objects.values_list("session_id", "status"))
    assert states == {"conv-1": "sealed", "task-1": "open", "conv-2": "open"}
    add(api, session_id="other-user", user_id="user-2")
    assert Session.objects.get(session_id="conv-2").status == "open"


def test_idle_sessions_are_sealed_by_the_beat_job(api, settings):
    from apps.conversations.services import seal_idle_sessions

    add(api, session_id="idle")
    assert seal_idle_sessions() == 0
    settings.SESSION_IDLE_SECONDS = -1
    assert seal_idle_sessions() == 1
    assert Session.objects.get(session_id="idle").status == "sealed"


def test_routing_by_session_tag(api, handlers):
    handlers["extract_memories"] = lambda task: None
    handlers["distill_session"] = lambda task: None

    conversation = add(api, session_id="conv").json()
    types = set(MemoryTask.objects.filter(pk__in=conversation["task_ids"]).values_list("task_type", flat=True))
    assert types == {"embed_messages", "extract_memories", "project_entities"}
    add(api, session_id="conv", messages=[{"role": "user", "content": "more"}])
    assert MemoryTask.objects.filter(task_type="extract_memories").count() == 1  # debounced per session
    api.post("/api/v1/sessions/conv/seal?user_id=user-1")
    assert not MemoryTask.objects.filter(task_type="distill_session").exists()

    task = add(api, session_id="work", session_tag="task").json()
    types = set(MemoryTask.objects.filter(pk__in=task["task_ids"]).values_list("task_type", flat=True))
    assert types == {"embed_messages"}
    sealed = api.post("/api/v1/sessions/work/seal?user_id=user-1").json()
    (distill,) = MemoryTask.objects.filter(pk__in=sealed["task_ids"])
    assert distill.task_type == "distill_session"
    assert MemoryTask.objects.filter(task_type="extract_memories").count() == 1  # task sessions never pay for it


@pytest.mark.parametrize(
    "body,field",
    [
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        (
            {"messages": [{"role": "user", "content": "ok"}, {"role": "assistant", "content": None}]},
            "messages.1.content",
        ),
        ({"session_id": "bad id!"}, "session_id"),
        ({"session_id": "x" * 65}, "session_id"),
        ({"session_tag": "chat"}, "session_tag"),
        ({"filter_tags": ["a"]}, "filter_tags"),
        ({"messages": []}, "messages"),
        ({"outcome": "great"}, "outcome"),
        ({"colour": "red"}, "colour"),
        ({"user_id": ""}, "user_id"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(api, body, field):
    response = add(api, **body)
    assert response.status_code == 400, response.content
    assert f"{field}:" in response.json()["error"]["message"]
    assert Message.objects.count() == 0 and Session.objects.count() == 0 and MemoryTask.objects.count() == 0


@override_settings(MAX_MESSAGES_PER_ADD=3)
def test_too_many_messages(api):
    response = add(api, messages=[{"role": "user", "content": str(n)} for n in range(4)])
    assert response.status_code == 400
    assert "At most 3 messages" in response.json()["error"]["message"]
    assert Message.objects.count() == 0


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_over_the_limit_is_a_json_413(api):
    response = add(api, messages=[{"role": "user", "content": "x" * 2000}])
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert Message.objects.count() == 0


def test_malformed_json_and_wrong_content_type(api):
    response = api.post("/api/v1/memory/add", "{nope", content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in response.json()["error"]["message"]
    response = api.post("/api/v1/memory/add", "a=b", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"


@override_settings(MESSAGE_MAX_CHARS=100)
def test_an_oversized_turn_is_truncated_and_counted(api):
    body = add(api, messages=[{"role": "user", "content": "y" * 500}, {"role": "user", "content": "fine"}]).json()
    assert body["messages_stored"] == 2 and body["messages_truncated"] == 1
    stored = Message.objects.get(seq=1)
    assert stored.truncated and "[truncated" in stored.content and len(stored.content) <= 100


@override_settings(
    CELERY_TASK_ALWAYS_EAGER=True,
    EMBEDDING_PROVIDER="openai",
    OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    LLM_MAX_RETRIES=0,
    LLM_TIMEOUT_SECONDS=1,
)
def test_a_failing_background_step_never_fails_the_add(api, django_capture_on_commit_callbacks):
    from apps.providers.llm import openai_client
    from memory_platform.celery import app

    openai_client.cache_clear()
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = add(api)
    finally:
        app.conf.task_always_eager = False
        openai_client.cache_clear()
    assert response.status_code == 202
    assert Message.objects.count() == 1
    task = MemoryTask.objects.get(task_type="embed_messages")
    assert task.status == "failed" and "Connection" in task.error


def test_list_filter_patch_and_delete(api, client_a):
    add(
        api,
        session_id="one",
        user_id="alice",
        messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    )
    add(api, session_id="two", user_id="bob", session_tag="task")
    listing = api.get("/api/v1/sessions/?user_id=alice").json()
    assert listing["count"] == 1 and listing["results"][0]["session_id"] == "one"
    assert api.get("/api/v1/sessions/?session_tag=task").json()["results"][0]["session_id"] == "two"
    assert api.get("/api/v1/sessions/?status=sealed").json()["count"] == 0
    assert api.get("/api/v1/sessions/?status=bogus").status_code == 400

    patched = api.patch("/api/v1/sessions/two/?user_id=bob", {"outcome": "success"}, format="json")
    assert patched.status_code == 200 and patched.json()["outcome"] == "success"
    assert api.get("/api/v1/sessions/two/").status_code == 400  # user_id is required

    message = Message.objects.filter(session__session_id="one").first()
    assert api.delete(f"/api/v1/memory/message/{message.pk}").status_code == 204
    assert api.get("/api/v1/sessions/one/?user_id=alice").json()["message_count"] == 1
    assert api.delete(f"/api/v1/memory/message/{message.pk}").status_code == 404


def test_transcript_pagination(api):
    add(api, messages=[{"role": "user", "content": str(n)} for n in range(5)])
    page = api.get("/api/v1/sessions/s1/?user_id=user-1&limit=2&offset=2").json()
    assert [message["content"] for message in page["messages"]] == ["2", "3"]
    assert page["messages_next_offset"] == 4


def test_read_scopes_decide_visibility_and_write_scope_decides_changes(api, client_a):
    add(api, session_id="mine")
    outsider = ClientFactory(organization=client_a.organization, write_scope="other")
    reader = ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other", "default"])
    assert api_for(outsider).get("/api/v1/sessions/mine/?user_id=user-1").status_code == 404
    assert api_for(outsider).get("/api/v1/sessions/").json()["count"] == 0
    assert api_for(reader).get("/api/v1/sessions/mine/?user_id=user-1").status_code == 200
    response = api_for(reader).post("/api/v1/sessions/mine/seal?user_id=user-1")
    assert response.status_code == 403 and "scope 'default'" in response.json()["error"]["message"]
    # Session ids are unique per user and scope: the reader's own scope gets a session of its own.
    response = add(api_for(reader), session_id="mine")
    assert response.status_code == 202
    assert Session.objects.get(scope="default", session_id="mine").message_count == 1


def test_a_session_id_names_the_write_scope_first_and_scope_disambiguates(api, client_a):
    add(api, session_id="twin", messages=[{"role": "user", "content": "in default"}])
    other = ClientFactory(organization=client_a.organization, write_scope="other", read_scopes=["other", "default"])
    add(api_for(other), session_id="twin", messages=[{"role": "user", "content": "in other"}])
    both = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default", "other"])

    def first_turn(client, query=""):
        response = api_for(client).get(f"/api/v1/sessions/twin/?user_id=user-1{query}")
        return response.status_code, response.json()["messages"][0][
            "content"
        ] if response.status_code == 200 else response.json()

    assert first_turn(client_a) == (200, "in default")
    assert first_turn(other) == (200, "in other"), "the client's own write scope wins"
    assert first_turn(other, "&scope=default") == (200, "in default")
    status, body = first_turn(both)
    assert status == 400 and "several scopes this client reads (default, other)" in body["error"]["message"]
    assert first_turn(both, "&scope=other") == (200, "in other")
    assert first_turn(client_a, "&scope=other")[0] == 404, "a scope the client does not read is not found"


def test_read_only_client_cannot_add(client_a):
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    response = add(api_for(reader))
    assert response.status_code == 403
    assert Message.objects.count() == 0


def test_session_list_query_count_is_bounded(api, django_assert_max_num_queries):
    for number in range(20):
        add(api, session_id=f"s{number}", user_id=f"u{number}")
    with django_assert_max_num_queries(5):
        assert api.get("/api/v1/sessions/?limit=100").json()["count"] == 20


def test_a_session_being_deleted_refuses_new_turns_until_its_purge_has_run(api):
    """New turns added between a session's accepted DELETE and its purge would be purged with it:
    they are refused with a 409 that says what to do, and the id is free again once the purge ran."""
    add(api, session_id="gone", user_id="alice", messages=[{"role": "user", "content": "first"}])
    assert api.delete("/api/v1/sessions/gone/?user_id=alice").status_code == 202

    refused = api.post(
        "/api/v1/memory/add",
        {"user_id": "alice", "session_id": "gone", "messages": [{"role": "user", "content": "second"}]},
        format="json",
    )
    assert refused.status_code == 409, refused.content
    assert "'gone' is being deleted" in refused.json()["error"]["message"]
    assert list(Message.objects.filter(session__session_id="gone").values_list("content", flat=True)) == ["first"]

    for task in MemoryTask.objects.filter(task_type="delete_session"):
        MemoryTask.objects.filter(pk=task.pk).update(run_after=timezone.now())
        task_execute(task_id=task.pk, worker="test")
    add(api, session_id="gone", user_id="alice", messages=[{"role": "user", "content": "again"}])
    assert list(Message.objects.filter(session__session_id="gone").values_list("content", flat=True)) == ["again"]
