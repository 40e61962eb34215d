"""Read replicas against a real streaming replica of the test database's server (pg_basebackup -R):
reads go to it, a client's own writes are read back from the primary, a lagging or lost replica
is skipped without an error."""

import threading
import time

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from apps.conversations.models import Session
from apps.core import replicas
from apps.portability.services.export import SCOPE, Selection, archive_export
from apps.portability.services.requests import export_path, export_request, export_run
from harness.processes import wait_for
from harness.replica import StreamingReplica
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.portability.conftest import archive_rows

ALIAS = "replica_0"
pytestmark = [pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, ALIAS]), pytest.mark.worker]


@pytest.fixture(scope="module")
def streaming_replica(django_db_setup, django_db_blocker):
    """One replica for the module, copied once the test database exists (so it holds it too), and
    named replica_0 in the settings before any test starts, since the tests list it among their
    databases (a mirror of `default`: nothing is created or flushed on it)."""
    with django_db_blocker.unblock():
        primary = connections[DEFAULT_DB_ALIAS]
        primary.ensure_connection()
        replica = StreamingReplica(
            primary_host=primary.settings_dict["HOST"], primary_port=primary.settings_dict["PORT"]
        )
    try:
        replica.create().start()
        connections.settings[ALIAS] = replica.database_settings(primary.settings_dict)
        yield replica
    finally:
        if ALIAS in connections.settings:
            connections[ALIAS].close()
            del connections[ALIAS]
            del connections.settings[ALIAS]
        replica.remove()


@pytest.fixture
def replica(streaming_replica, transactional_db, settings):
    """The replica as alias replica_0 of this test's settings, running and replaying."""
    if not streaming_replica.running():
        streaming_replica.start()
    streaming_replica.resume_replay()
    settings.REPLICA_MAX_LAG_SECONDS = 5.0
    settings.REPLICA_CHECK_SECONDS = 0.2
    settings.REPLICA_RETRY_SECONDS = 5.0
    replicas.reset()
    yield streaming_replica
    if streaming_replica.running():
        streaming_replica.resume_replay()
    replicas.reset()


@pytest.fixture
def reader_client(client_a):
    """A second client of the same organisation and scope that never writes: its reads are not pinned."""
    return ClientFactory(organization=client_a.organization, name="reader", write_scope=None, read_scopes=["default"])


def add(client, content: str, session_id: str = "s1"):
    response = api_for(client).post(
        "/api/v1/memory/add",
        {"user_id": "alice", "session_id": session_id, "messages": [{"role": "user", "content": content}]},
        format="json",
    )
    assert response.status_code == 202, response.content
    return response


def search(client, query: str) -> list[str]:
    response = api_for(client).post(
        "/api/v1/memory/search",
        {"user_id": "alice", "query": query, "memory_types": ["message"], "search_method": "bm25"},
        format="json",
    )
    assert response.status_code == 200, response.content
    return [result["content"] for result in response.json()["results"]]


def replayed(replica: StreamingReplica, content: str) -> bool:
    """Whether the replica's copy of the test database holds a turn with this content."""
    with replica.connect(connections[DEFAULT_DB_ALIAS].settings_dict["NAME"]) as connection:
        return (
            connection.execute("SELECT count(*) FROM conversations_message WHERE content = %s", [content]).fetchone()[0]
            > 0
        )


def test_a_client_reads_from_the_replica_and_its_own_writes_from_the_primary(replica, client_a, reader_client):
    add(client_a, "the lighthouse keeper paints boats")
    wait_for(lambda: replayed(replica, "the lighthouse keeper paints boats"), timeout=10, message="replay")
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=10, message="the replica in use")

    # Replay stops: what is written now is on the primary only.
    replica.pause_replay()
    add(client_a, "the lighthouse keeper repairs nets")
    assert not replayed(replica, "the lighthouse keeper repairs nets")

    # The writer reads its own write at once (from the primary); a client that wrote nothing reads
    # the replica, which does not have it yet: the reads really are served by the replica.
    assert "the lighthouse keeper repairs nets" in search(client_a, "lighthouse keeper")
    assert replicas.read_alias(client_a) == DEFAULT_DB_ALIAS
    assert search(reader_client, "lighthouse keeper") == ["the lighthouse keeper paints boats"]

    replica.resume_replay()
    wait_for(lambda: replicas.read_alias(client_a) == ALIAS, timeout=10, message="the writer back on the replica")
    assert sorted(search(client_a, "lighthouse keeper")) == [
        "the lighthouse keeper paints boats",
        "the lighthouse keeper repairs nets",
    ]


def test_a_row_read_from_the_replica_is_written_to_the_primary(replica, client_a):
    add(client_a, "a turn in a session")
    wait_for(lambda: replayed(replica, "a turn in a session"), timeout=10, message="replay")
    session = client_a.reader.on(ALIAS).objects(Session).get(session_id="s1")
    assert session._state.db == ALIAS
    assert session.end_user._state.db == ALIAS  # what it loads lazily is read where it was read
    session.message_count = 99
    session.save(update_fields=["message_count"])  # on the read-only standby this would fail
    assert Session.objects.get(pk=session.pk).message_count == 99


def test_context_and_lists_read_from_the_replica(replica, client_a, reader_client):
    add(client_a, "my sister Ada lives in Lisbon")
    wait_for(lambda: replayed(replica, "my sister Ada lives in Lisbon"), timeout=10, message="replay")
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=10, message="the replica in use")
    replica.pause_replay()
    add(client_a, "my sister Ada moved to Porto", session_id="s2")

    context = api_for(reader_client).post(
        "/api/v1/memory/context", {"user_id": "alice", "query": "where does Ada live?"}, format="json"
    )
    assert context.status_code == 200, context.content
    assert "Lisbon" in context.json()["text"] and "Porto" not in context.json()["text"]
    sessions = api_for(reader_client).get("/api/v1/sessions/", {"user_id": "alice"}).json()
    assert [session["session_id"] for session in sessions["results"]] == ["s1"]

    # The writer's own list shows its newest session at once.
    own = api_for(client_a).get("/api/v1/sessions/", {"user_id": "alice"}).json()
    assert sorted(session["session_id"] for session in own["results"]) == ["s1", "s2"]


def test_an_export_reads_a_replica_only_once_it_has_replayed_what_was_committed(replica, client_a, tmp_path, settings):
    add(client_a, "a turn every copy has")
    wait_for(lambda: replayed(replica, "a turn every copy has"), timeout=10, message="replay")
    replica.pause_replay()
    add(client_a, "a turn committed just before the export")
    selection = Selection(organization=client_a.organization, kind=SCOPE, scope="default")

    # Read from the paused replica, an archive would miss the newest turn (or, after an erasure,
    # still hold what was erased)...
    archive_export(selection=selection, path=tmp_path / "stale.zip", database=ALIAS)
    assert [row["content"] for row in archive_rows(tmp_path / "stale.zip")["messages"]] == ["a turn every copy has"]

    # ...so an export run waits (at most REPLICA_MAX_LAG_SECONDS) for a replica that has replayed
    # everything committed when it starts, then reads the primary.
    settings.REPLICA_MAX_LAG_SECONDS = 1.0
    exporter = ClientFactory(organization=client_a.organization, name="exporter", can_export=True)
    export = export_request(client=exporter, selection="scope", value="default")
    export_run(export=export)
    export.refresh_from_db()
    assert sorted(row["content"] for row in archive_rows(export_path(export))["messages"]) == [
        "a turn committed just before the export",
        "a turn every copy has",
    ]

    replica.resume_replay()
    wait_for(lambda: replicas.read_alias() == ALIAS, timeout=10, message="the replica to catch up")


def test_a_replica_lagging_past_the_limit_is_skipped(replica, client_a, reader_client, settings):
    settings.REPLICA_MAX_LAG_SECONDS = 0.5
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=10, message="the replica in use")
    replica.pause_replay()
    add(client_a, "the ferry leaves at noon")
    time.sleep(1.0)  # replay is stopped and the primary has moved on: the replica falls behind
    assert replicas.read_alias(reader_client) == DEFAULT_DB_ALIAS
    assert search(reader_client, "ferry") == ["the ferry leaves at noon"]

    replica.resume_replay()
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=10, message="the replica caught up")


def test_an_idle_primary_does_not_make_its_replica_look_behind(replica, client_a, reader_client, settings):
    settings.REPLICA_MAX_LAG_SECONDS = 0.5
    add(client_a, "an old turn")
    wait_for(lambda: replayed(replica, "an old turn"), timeout=10, message="replay")
    time.sleep(1.5)  # nothing is written: the last replayed transaction grows old, the replica is current
    replicas.reset()
    # Judged by its last replayed transaction, it would stay "1.5 s behind" for as long as nothing is
    # written; judged by what it has replayed of the primary's WAL, it is current within a check or two.
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=2, message="the idle replica in use")


def test_replica_lost_under_load_returns_no_errors(replica, client_a, reader_client):
    for number in range(5):
        add(client_a, f"harbour note {number}", session_id=f"s{number}")
    wait_for(lambda: replayed(replica, "harbour note 4"), timeout=10, message="replay")
    wait_for(lambda: replicas.read_alias(reader_client) == ALIAS, timeout=10, message="the replica in use")

    statuses, failures = [], []
    stop = threading.Event()

    def load(client):
        api = api_for(client)
        try:
            while not stop.is_set():
                for request in (
                    lambda: api.post(
                        "/api/v1/memory/search", {"user_id": "alice", "query": "harbour note"}, format="json"
                    ),
                    lambda: api.post(
                        "/api/v1/memory/context", {"user_id": "alice", "query": "harbour note"}, format="json"
                    ),
                    lambda: api.get("/api/v1/sessions/", {"user_id": "alice"}),
                ):
                    statuses.append(request().status_code)
        except Exception as error:  # noqa: BLE001 - any exception is a failure the test reports
            failures.append(repr(error))
        finally:
            connections.close_all()

    def writes():
        try:
            number = 0
            while not stop.is_set():
                add(client_a, f"harbour log {number}", session_id="writes")
                number += 1
        except Exception as error:  # noqa: BLE001
            failures.append(repr(error))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=load, args=(reader_client,)) for _ in range(3)]
    threads.append(threading.Thread(target=writes))
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    served_before = len(statuses)
    replica.stop(mode="immediate")  # the replica's machine dies mid-load
    time.sleep(2.0)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    assert served_before > 0 and len(statuses) > served_before
    assert set(statuses) == {200}
    assert replicas.read_alias(reader_client) == DEFAULT_DB_ALIAS  # marked down: the primary serves
