"""A failing request's log lines name routes and error classes, never what the request carried."""

import http.client
import json
import uuid

import pytest
from django.db import connection, transaction

from harness.processes import WebServer, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REFUSE_TURNS = """
CREATE FUNCTION test_refuse_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'turn refused: %', NEW.content; END $$;
CREATE TRIGGER test_refuse_turn BEFORE INSERT ON conversations_message FOR EACH ROW EXECUTE FUNCTION test_refuse_turn();
"""


@pytest.fixture
def refused_turns(transactional_db):
    """Every stored turn fails with a database error that quotes the turn, as constraint errors quote rows."""
    with connection.cursor() as cursor:
        cursor.execute(REFUSE_TURNS)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER test_refuse_turn ON conversations_message; DROP FUNCTION test_refuse_turn()")


def test_a_failing_requests_log_lines_do_not_contain_its_text(refused_turns, client_a, add_messages, tmp_path):
    marker = uuid.uuid4().hex[:12]
    user_id, session_id, content = f"user-{marker}", f"sess-{marker}", f"my secret is {marker}"
    # The test can fail: the database error itself quotes the request's text.
    with pytest.raises(Exception) as raised, transaction.atomic():
        add_messages(client_a, user_id=user_id, session_id=session_id, messages=[{"role": "user", "content": content}])
    assert marker in str(raised.value)

    server = WebServer(
        broker_url="redis://127.0.0.1:1/0",
        settings_dict=connection.settings_dict,
        log_path=tmp_path / "web.log",
        workers=1,
        threads=1,
        env={"LOG_LEVEL": "INFO"},
        extra_args=("--access-logfile", "-", "--logger-class", "apps.core.access_log.AccessLogger"),
    ).start()
    try:
        api = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        headers = {"Authorization": f"Api-Key {client_a.raw_key}", "Content-Type": "application/json"}
        body = {"user_id": user_id, "session_id": session_id, "messages": [{"role": "user", "content": content}]}
        api.request("POST", "/api/v1/memory/add", body=json.dumps(body), headers=headers)
        failed = api.getresponse()
        assert failed.status == 500 and marker not in failed.read().decode()
        api.request("GET", f"/api/v1/sessions/{session_id}/?user_id={user_id}", headers=headers)
        missing = api.getresponse()
        assert missing.status == 404
        missing.read()
        wait_for(lambda: "/api/v1/sessions/<str:session_id>/" in server.log(), timeout=10, message="the access log")
    finally:
        server.stop()

    log = server.log()
    assert "unhandled django.db.utils.ProgrammingError on POST /api/v1/memory/add" in log
    assert "psycopg.errors.RaiseException: (message withheld" in log, "the traceback keeps its frames and classes"
    assert "Not Found: /api/v1/sessions/<str:session_id>/" in log
    assert (
        '"POST /api/v1/memory/add HTTP/1.1" 500' in log
        and '"GET /api/v1/sessions/<str:session_id>/ HTTP/1.1" 404' in log
    )
    assert marker not in log


def test_exceptions_passed_as_arguments_and_runserver_request_lines_are_redacted():
    import io
    import logging

    from apps.core.logs import RedactUserContent

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactUserContent())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    # Levels of their own: an in-process Celery worker of an earlier test (celery.contrib.testing) sets
    # the root logger to ERROR for the rest of the session.
    logger.setLevel(logging.INFO)
    server_level = logging.getLogger("django.server").level
    logging.getLogger("django.server").setLevel(logging.INFO)
    try:
        logger.warning("task failed: %s", ValueError("user said tango-7731"))
        logging.getLogger("django.server").addHandler(handler)
        logging.getLogger("django.server").info(
            '"%s" %s %s', "GET /api/v1/sessions/tango-7731/?user_id=tango-7731 HTTP/1.1", "404", "66"
        )
    finally:
        logger.removeHandler(handler)
        logging.getLogger("django.server").removeHandler(handler)
        logging.getLogger("django.server").setLevel(server_level)
    output = stream.getvalue()
    assert "task failed: ValueError" in output and "GET /api/v1/sessions/<str:session_id>/ 404" in output
    assert "tango-7731" not in output


def _logged(*exceptions_or_lines) -> str:
    """What a redacting handler writes for each (message, exception) pair, as tracebacks and as arguments."""
    import io
    import logging

    from apps.core.logs import RedactUserContent

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactUserContent())
    logger = logging.getLogger("tests.by_source")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # whatever an earlier test left the root logger at
    try:
        for exc in exceptions_or_lines:
            logger.error("failed", exc_info=exc)
            logger.warning("failed with %s", exc)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def _raised(function) -> BaseException:
    try:
        function()
    except BaseException as exc:  # the real exception, with its real traceback
        return exc
    raise AssertionError("expected an exception")


def test_broker_and_database_connection_failures_are_readable(tmp_path):
    """What an operator needs: the broker and database libraries' own words about the connection."""
    import psycopg
    import redis

    from harness.processes import free_port

    port = free_port()  # nothing listens there
    broker = _raised(lambda: redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1).ping())
    database = _raised(lambda: psycopg.connect(host=str(tmp_path), dbname="nothing", connect_timeout=1))

    output = _logged(broker, database)

    assert f"redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:{port}" in output
    assert "psycopg.OperationalError: connection is bad" in output and str(tmp_path) in output
    assert "failed with redis.exceptions.ConnectionError: Error 111" in output


def test_errors_about_a_requests_data_stay_withheld(client_a):
    """A database error quoting a row, a validation error and an error of the platform's own code
    carry the request's values: only their class is logged."""
    from django.db import IntegrityError

    from apps.tenancy.models import Organization

    secret = "tango-7731-secret"
    Organization.objects.create(name=secret)
    duplicate = _raised(lambda: transaction.atomic()(Organization.objects.create)(name=secret))
    assert isinstance(duplicate, IntegrityError) and secret in str(duplicate), "the test can fail"

    def own_code():
        raise AttributeError(f"no attribute {secret}")

    output = _logged(duplicate, ValueError(f"user said {secret}"), _raised(own_code))

    assert "django.db.utils.IntegrityError: (message withheld" in output
    assert "AttributeError: (message withheld" in output
    assert secret not in output
