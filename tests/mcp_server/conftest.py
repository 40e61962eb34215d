"""The MCP endpoint as it is deployed: `manage.py runmcp` in its own process, on the test database,
driven by the official MCP SDK's client."""

import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from django.db import connection

from harness.processes import BASE_DIR, database_url, free_port, wait_for


class McpProcess:
    def __init__(self, log_path: Path, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log_path
        self.env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="memory_platform.settings",
            DATABASE_URL=database_url(connection.settings_dict),
            # Never take a handle on the embedded server: only the test process may stop it.
            EMBEDDED_POSTGRES_ATTACH="1",
            PYTHONPATH=str(BASE_DIR),
            **(env or {}),
        )
        self.process = None

    def start(self) -> "McpProcess":
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runmcp", "--bind", f"127.0.0.1:{self.port}"],
            cwd=BASE_DIR,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self._ready, timeout=60, interval=0.2, message=f"runmcp on port {self.port} (log {self.log_path})")
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"runmcp exited with {self.process.returncode}:\n{self.log_path.read_text()}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def mcp_server(django_db_setup, tmp_path_factory):
    """One `runmcp` process for the session, stopped before the test database is dropped."""
    server = McpProcess(tmp_path_factory.mktemp("mcp") / "runmcp.log").start()
    yield server
    server.stop()
