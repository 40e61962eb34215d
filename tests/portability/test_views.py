"""POST exports → 202 and a task; GET exports/<id> → status and a download_url for the requester only,
until the archive expires and is deleted."""

import io
import time
import zipfile
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.utils import timezone

from apps.pipeline.services import task_execute
from apps.portability.models import ExportPerson, ExportRequest
from apps.portability.services.requests import export_path, exports_expire
from memory_platform.celery import app
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.portability.conftest import archive_rows
from tests.privacy.conftest import ALICE, ALICE_WORD, BOB, BOB_WORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def exporter(world):
    world.client_a.can_export = True
    world.client_a.save(update_fields=["can_export"])
    return world.client_a


def _download(api, body) -> bytes:
    return b"".join(api.get(body["download_url"]).streaming_content)


def test_a_users_export_runs_and_only_its_requester_downloads_it(world, exporter, tmp_path):
    api = api_for(exporter)
    accepted = api.post("/api/v1/exports", {"user_id": ALICE}, format="json")
    assert accepted.status_code == 202, accepted.content
    export_id, task_id = accepted.json()["id"], accepted.json()["task_id"]
    queued = api.get(f"/api/v1/exports/{export_id}").json()
    assert queued["status"] == "queued" and queued["download_url"] is None
    assert api.get(f"/api/v1/exports/{export_id}/download").status_code == 409

    task_execute(task_id=task_id, worker="test")
    ready = api.get(f"/api/v1/exports/{export_id}").json()
    assert ready["status"] == "succeeded" and ready["download_url"].endswith(f"/api/v1/exports/{export_id}/download")
    assert ready["counts"]["messages"] > 0 and ready["expires_at"] and ready["selection"] == "user"
    archive = tmp_path / "downloaded.zip"
    archive.write_bytes(_download(api, ready))
    rows = archive_rows(archive)
    assert [row["user_id"] for row in rows["end_users"]] == [ALICE] and BOB_WORD not in archive.read_bytes().decode(
        "latin-1"
    )

    # Another client allowed to export in the same organisation sees nothing of it.
    other = ClientFactory(organization=world.organization, name="other-exporter", can_export=True)
    for url in (f"/api/v1/exports/{export_id}", f"/api/v1/exports/{export_id}/download"):
        assert api_for(other).get(url).status_code == 404


def test_an_expired_archive_is_deleted_and_no_longer_offered(world, exporter):
    api = api_for(exporter)
    body = api.post("/api/v1/exports", {"scope": "default"}, format="json").json()
    task_execute(task_id=body["task_id"], worker="test")
    export = ExportRequest.objects.get(pk=body["id"])
    path = export_path(export)
    assert path.is_file()
    ExportRequest.objects.filter(pk=export.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api.get(f"/api/v1/exports/{export.pk}").json()["download_url"] is None
    assert exports_expire() == {"expired": 1}
    assert not path.exists() and api.get(f"/api/v1/exports/{export.pk}").json()["status"] == "expired"
    assert api.get(f"/api/v1/exports/{export.pk}/download").status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "non_field_errors"),
        ({"user_id": ALICE, "scope": "default"}, "non_field_errors"),
        ({"scope": "not a scope"}, "scope"),
        ({"user_id": "a\u0000b"}, "user_id"),
        ({"user": ALICE}, "user"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(exporter, body, field):
    response = api_for(exporter).post("/api/v1/exports", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in str(error.get("details", error["message"]))


def test_unknown_subjects_are_404_and_clients_without_the_permission_are_refused_first(world, exporter):
    api = api_for(exporter)
    for body in ({"user_id": "nobody"}, {"client_id": "not-a-uuid"}, {"client_id": str(world.foreign_client.pk)}):
        assert api.post("/api/v1/exports", body, format="json").status_code == 404
    assert api.post("/api/v1/exports", {"client_id": str(world.client_c.pk)}, format="json").status_code == 202
    refused = api_for(world.client_c).post("/api/v1/exports", {"user_id": "nobody"}, format="json")
    assert refused.status_code == 403 and "can_export" in refused.json()["error"]["message"]
    assert api_for(world.client_c).post("/api/v1/exports", {"user_id": ALICE}, format="json").content == refused.content


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_writes_the_archive(add_messages, settings):
    client = ClientFactory(can_export=True)
    add_messages(client, "dana", "chat", [{"role": "user", "content": "my export please"}])
    api = api_for(client)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        export_id = api.post("/api/v1/exports", {"user_id": "dana"}, format="json").json()["id"]
        deadline = time.monotonic() + 120  # generous: a loaded machine runs workers slowly
        while (body := api.get(f"/api/v1/exports/{export_id}").json())["status"] != "succeeded":
            assert time.monotonic() < deadline and body["status"] in ("queued", "running"), body
            time.sleep(0.5)
    with zipfile.ZipFile(io.BytesIO(_download(api, body))) as archive:
        assert b"my export please" in archive.read("messages.jsonl")


def _exported(api, body: dict) -> ExportRequest:
    accepted = api.post("/api/v1/exports", body, format="json").json()
    task_execute(task_id=accepted["task_id"], worker="test")
    export = ExportRequest.objects.get(pk=accepted["id"])
    assert export.status == "succeeded" and export_path(export).is_file()
    return export


def _holds(export: ExportRequest, word: str) -> bool:
    with zipfile.ZipFile(export_path(export)) as archive:
        return any(word.encode() in archive.read(name).lower() for name in archive.namelist())


@pytest.mark.parametrize("erased", ["user", "client"])
def test_erasure_deletes_every_archive_that_holds_the_subjects_rows_and_only_those(world, exporter, erased):
    """Bob's turns are in his own archive, the scope's, and agent C's (C wrote one of them); an
    erasure of Bob, or of agent C, deletes each archive holding their rows; Alice's stays."""
    api = api_for(exporter)
    exports = {
        "bob": _exported(api, {"user_id": BOB}),
        "alice": _exported(api, {"user_id": ALICE}),
        "scope": _exported(api, {"scope": "default"}),
        "client_c": _exported(api, {"client_id": str(world.client_c.pk)}),
    }
    assert all(_holds(exports[name], BOB_WORD) for name in ("bob", "scope")) and not _holds(exports["alice"], BOB_WORD)
    assert all(_holds(exports[name], "aisle") for name in ("bob", "scope", "client_c"))
    url = f"/api/v1/users/{BOB}/memories" if erased == "user" else f"/api/v1/clients/{world.client_c.pk}/memories"
    erasure = api.delete(url).json()
    task_execute(task_id=erasure["task_id"], worker="test")

    paths = {name: export_path(export) for name, export in exports.items()}
    gone = {"bob", "scope", "client_c"}  # agent C wrote one of Bob's turns: either erasure reaches all three
    for name, export in exports.items():
        export.refresh_from_db()
        status = api.get(f"/api/v1/exports/{export.pk}").json()
        if name in gone:
            assert export.status == "expired" and not paths[name].exists() and status["download_url"] is None, name
        else:
            assert export.status == "succeeded" and paths[name].is_file() and status["download_url"], name
    assert not ExportPerson.objects.filter(export__in=[exports[name] for name in gone]).exists()
    counts = api.get(f"/api/v1/erasures/{erasure['erasure_id']}/").json()["counts"]
    assert counts["portability.ExportRequest (archive deleted)"] == len(gone)


def test_an_export_written_while_an_erasure_runs_is_written_again_without_the_subject(world, exporter, monkeypatch):
    """The erasure runs between the export's reads and its completion (a real erasure, through its
    task): the archive read before it is discarded and the one served holds nothing of Bob."""
    from apps.portability.services import requests

    api = api_for(exporter)
    erasure = {}
    real_export = requests.archive_export

    def export_then_erase(**kwargs):
        manifest = real_export(**kwargs)
        if not erasure:
            erasure.update(api.delete(f"/api/v1/users/{BOB}/memories").json())
            assert task_execute(task_id=erasure["task_id"], worker="test") == "succeeded"
        return manifest

    monkeypatch.setattr(requests, "archive_export", export_then_erase)
    export = _exported(api, {"scope": "default"})
    assert erasure and not _holds(export, BOB_WORD) and _holds(export, ALICE_WORD)
    assert not ExportPerson.objects.filter(export=export, kind="user", subject_id=BOB).exists()
    assert ExportPerson.objects.filter(export=export, kind="user", subject_id=ALICE).exists()


def test_erasing_a_person_deletes_their_archives_waiting_for_download(world, exporter):
    api = api_for(exporter)
    body = api.post("/api/v1/exports", {"user_id": ALICE}, format="json").json()
    task_execute(task_id=body["task_id"], worker="test")
    path = export_path(ExportRequest.objects.get(pk=body["id"]))
    assert path.is_file()
    erasure = api.delete(f"/api/v1/users/{ALICE}/memories").json()
    task_execute(task_id=erasure["task_id"], worker="test")
    assert not path.exists()
    assert api.get(f"/api/v1/exports/{body['id']}").json()["status"] == "expired"
    assert (
        api.get(f"/api/v1/erasures/{erasure['erasure_id']}/").json()["counts"][
            "portability.ExportRequest (archive deleted)"
        ]
        == 1
    )


def test_a_repeated_request_answers_the_export_still_being_written(world, exporter):
    api = api_for(exporter)
    first = api.post("/api/v1/exports", {"scope": "default"}, format="json").json()
    for _ in range(3):
        again = api.post("/api/v1/exports", {"scope": "default"}, format="json")
        assert again.status_code == 202 and again.json()["id"] == first["id"]
        assert again.json()["task_id"] == first["task_id"]
    assert ExportRequest.objects.filter(selection="scope", value="default").count() == 1
    # Another subject, or another client, is another export.
    assert api.post("/api/v1/exports", {"user_id": ALICE}, format="json").json()["id"] != first["id"]
    other = ClientFactory(organization=world.organization, name="other-exporter", can_export=True)
    assert api_for(other).post("/api/v1/exports", {"scope": "default"}, format="json").json()["id"] != first["id"]
    # Once it is written, asking again writes a new archive.
    task_execute(task_id=first["task_id"], worker="test")
    assert api.post("/api/v1/exports", {"scope": "default"}, format="json").json()["id"] != first["id"]


def test_an_export_and_its_task_are_readable_by_their_requester_only(world, exporter):
    accepted = api_for(exporter).post("/api/v1/exports", {"user_id": ALICE}, format="json").json()
    task_execute(task_id=accepted["task_id"], worker="test")
    assert api_for(exporter).get(f"/api/v1/tasks/{accepted['task_id']}/").json()["result"]["export"] == accepted["id"]
    eraser = ClientFactory(organization=world.organization, name="eraser", can_erase=True)
    for client in (eraser, world.reader, world.client_c):
        assert api_for(client).get(f"/api/v1/tasks/{accepted['task_id']}/").status_code == 404
    # Exports themselves need can_export, checked before the id is looked up (the same 403 for any id).
    refused = api_for(eraser).get(f"/api/v1/exports/{accepted['id']}")
    assert refused.status_code == 403 and "can_export" in refused.json()["error"]["message"]
    # The eraser still sees its own erasures' tasks and the organisation's.
    erasure = api_for(eraser).delete(f"/api/v1/users/{BOB}/memories").json()
    assert api_for(eraser).get(f"/api/v1/tasks/{erasure['task_id']}/").status_code == 200
    assert api_for(exporter).get(f"/api/v1/tasks/{erasure['task_id']}/").status_code == 200


BEACHES = b"beaches"  # in Alice's chat-1 only


def _archive_bytes(export: ExportRequest) -> bytes:
    with zipfile.ZipFile(export_path(export)) as archive:
        return b"".join(archive.read(name) for name in archive.namelist())


def test_deleting_a_session_writes_the_archives_holding_it_again_without_it(world, exporter):
    api = api_for(exporter)
    exports = {
        "alice": _exported(api, {"user_id": ALICE}),
        "scope": _exported(api, {"scope": "default"}),
        "bob": _exported(api, {"user_id": BOB}),
    }
    assert all(BEACHES in _archive_bytes(exports[name]) for name in ("alice", "scope"))
    old_paths = {name: export_path(export) for name, export in exports.items()}
    bob_sha = exports["bob"].sha256

    deleted = api.delete(f"/api/v1/sessions/chat-1/?user_id={ALICE}")
    assert deleted.status_code == 202, deleted.content
    task_execute(task_id=deleted.json()["task_id"], worker="test")
    result = api.get(f"/api/v1/tasks/{deleted.json()['task_id']}/").json()["result"]
    assert result["portability.ExportRequest (archive written again)"] == 2

    for name in ("alice", "scope"):
        export = exports[name]
        export.refresh_from_db()
        assert not old_paths[name].exists() and export.status == "queued", name
        assert api.get(f"/api/v1/exports/{export.pk}").json()["download_url"] is None
        task_execute(task_id=export.task_id, worker="test")
        export.refresh_from_db()
        assert export.status == "succeeded" and BEACHES not in _archive_bytes(export), name
        assert ALICE_WORD.encode() in _archive_bytes(export)  # her other sessions stay
    exports["bob"].refresh_from_db()
    assert exports["bob"].status == "succeeded" and exports["bob"].sha256 == bob_sha and old_paths["bob"].is_file()


def test_deleting_a_memory_writes_the_archives_holding_it_again(world, exporter):
    from apps.memories.models import SemanticMemory

    api = api_for(exporter)
    export = _exported(api, {"user_id": BOB})
    memory = SemanticMemory.objects.get(end_user__user_id=BOB, summary__startswith=f"{BOB} talked about aisle")

    def archived(export) -> set[str]:
        return {row["id"] for row in archive_rows(export_path(export))["semantic_memories"]}

    assert str(memory.pk) in archived(export)
    assert api.delete(f"/api/v1/memory/semantic/{memory.pk}").status_code == 204
    export.refresh_from_db()
    assert export.status == "queued"
    task_execute(task_id=export.task_id, worker="test")
    export.refresh_from_db()
    assert export.status == "succeeded" and archived(export) and str(memory.pk) not in archived(export)


def test_deleting_a_turn_writes_the_archives_holding_it_again(world, exporter):
    from apps.conversations.models import Message

    api = api_for(exporter)
    export = _exported(api, {"user_id": ALICE})
    turn = Message.objects.get(end_user__user_id=ALICE, content__contains="beaches")
    assert api.delete(f"/api/v1/memory/message/{turn.pk}").status_code == 204
    export.refresh_from_db()
    task_execute(task_id=export.task_id, worker="test")
    export.refresh_from_db()
    assert export.status == "succeeded" and BEACHES not in _archive_bytes(export)
