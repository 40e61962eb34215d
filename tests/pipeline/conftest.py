import pytest
from django.db import connection

from apps.pipeline.registry import HANDLERS, register_handler
from harness.processes import RedisServer, celery_broker
from tests.pipeline.fault_handlers import EFFECTS_TABLE, RUNS_TABLE


@pytest.fixture
def private_redis():
    """A redis-server of this test's own, on a free port; the machine's Redis is never touched."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def broker(private_redis):
    """This process publishes to the private Redis for the duration of the test."""
    with celery_broker(private_redis.url):
        yield private_redis


@pytest.fixture
def handlers():
    """`handlers("test_x", function)` registers a handler for this test only."""
    registered = []

    def register(task_type: str, function):
        assert task_type.startswith("test_"), "test handlers use task types prefixed test_"
        register_handler(task_type)(function)
        registered.append(task_type)
        return function

    yield register
    for task_type in registered:
        HANDLERS.pop(task_type, None)


@pytest.fixture
def run_tables(transactional_db):
    """The fault handlers' tables (tests.pipeline.fault_handlers), dropped afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {EFFECTS_TABLE} (task_id uuid PRIMARY KEY, at timestamptz DEFAULT now())")
        cursor.execute(f"CREATE TABLE {RUNS_TABLE} (task_id uuid, attempt int, pid int, at timestamptz DEFAULT now())")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {EFFECTS_TABLE}, {RUNS_TABLE}")
