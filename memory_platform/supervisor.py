"""The process supervisor of `make run` (`runplatform`): starts the web server, the MCP endpoint,
the Celery worker and beat, restarts any of them that exits (with backoff), and keeps a small
state file that /readyz and the admin dashboard read to show how often each was restarted.

Each child writes to its own log file; the terminal gets the supervisor's lines and, from the
children's logs, only their warnings and errors (one line each, naming the file to read).
"""

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

# A child that ran this long before exiting starts again at once; one that keeps failing sooner
# waits 1, 2, 4 … up to RESTART_MAX_DELAY seconds between attempts.
RESTART_RESET_AFTER_SECONDS = 60.0
RESTART_MAX_DELAY_SECONDS = 30.0
# A warning or an error in the children's log formats: Django's "… WARNING name …", Celery's
# "[…: WARNING/MainProcess]", gunicorn's "[…] [ERROR]".
_LOUD = re.compile(r"(?:^|[\s\[/])(WARNING|ERROR|CRITICAL)[\s\]/:]")
# Lines worth nothing to an operator at a terminal: Celery's note about running as root in a
# development container, and the deprecation notice it prints on every reconnect.
_QUIET = ("SecurityWarning", "CPendingDeprecationWarning")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    env: dict
    process: subprocess.Popen | None = None
    restarts: int = 0
    failures_in_a_row: int = 0
    started_at: float = 0.0
    restart_at: float | None = None
    last_exit_code: int | None = None
    last_restart_at: str | None = None
    _log_offset: int = 0
    _log_rest: str = ""

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # A session of its own: Ctrl-C reaches only the supervisor, which stops the children in order.
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.started_at = time.monotonic()
        self.restart_at = None

    def loud_lines(self) -> list[str]:
        """The warning and error lines written to the log since the last call."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                chunk = log.read()
        except FileNotFoundError:
            return []
        self._log_offset += len(chunk)
        text = self._log_rest + chunk.decode(errors="replace")
        lines = text.split("\n")
        self._log_rest = lines.pop()
        return [line for line in lines if _LOUD.search(line) and not any(word in line for word in _QUIET)]

    def state(self) -> dict:
        alive = self.process is not None and self.process.poll() is None
        return {
            "status": "running" if alive else "restarting",
            "pid": self.process.pid if alive else None,
            "restarts": self.restarts,
            "last_exit_code": self.last_exit_code,
            "last_restart_at": self.last_restart_at,
            "log": str(self.log_path),
        }


@dataclass
class Supervisor:
    children: list[Child]
    state_path: Path
    say: callable = print
    stopping: bool = False
    started_at: str = field(default_factory=_now)

    def start(self) -> None:
        for child in self.children:
            child.start()
            child._log_offset = child.log_path.stat().st_size if child.log_path.exists() else 0
        self.write_state()

    def poll(self) -> None:
        """One round: forward the loud log lines, notice exits, start what is due."""
        now = time.monotonic()
        changed = False
        for child in self.children:
            for line in child.loud_lines():
                self.say(f"[{child.name}] {line.strip()}")
            if child.process is not None and child.restart_at is None and child.process.poll() is not None:
                code = child.process.returncode
                child.last_exit_code = code
                _kill_group(child.process.pid)  # a prefork worker's pool processes must not outlive it
                ran = now - child.started_at
                child.failures_in_a_row = 0 if ran >= RESTART_RESET_AFTER_SECONDS else child.failures_in_a_row + 1
                delay = (
                    min(RESTART_MAX_DELAY_SECONDS, 2 ** (child.failures_in_a_row - 1))
                    if child.failures_in_a_row
                    else 0.0
                )
                child.restart_at = now + delay
                self.say(
                    f"{child.name} exited with code {code} after {ran:.0f} s; restarting it in {delay:.0f} s "
                    f"(restart {child.restarts + 1}; its log: {child.log_path})"
                )
                changed = True
            if child.restart_at is not None and now >= child.restart_at:
                child.restarts += 1
                child.last_restart_at = _now()
                child.start()
                changed = True
        if changed:
            self.write_state()

    def run(self, *, interval: float = 0.5) -> None:
        while not self.stopping:
            self.poll()
            time.sleep(interval)

    def stop(self, *, grace: float = 20.0) -> None:
        self.stopping = True
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
            _kill_group(child.process.pid)
        self.state_path.unlink(missing_ok=True)

    def write_state(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "started_at": self.started_at,
            "children": {child.name: child.state() for child in self.children},
        }
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.state_path.with_suffix(".tmp")
        partial.write_text(json.dumps(state, indent=2))
        partial.replace(self.state_path)  # readers never see half a file


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def supervisor_status() -> dict | None:
    """What /readyz and the dashboard show of `runplatform`'s children, or None when the platform
    does not run under it (compose, systemd, Kubernetes restart processes themselves)."""
    path = settings.SUPERVISOR_STATE_FILE
    if not path:
        return None
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return {
        name: {
            "status": child["status"],
            "restarts": child["restarts"],
            "last_exit_code": child["last_exit_code"],
            "last_restart_at": child["last_restart_at"],
        }
        for name, child in state.get("children", {}).items()
    }
