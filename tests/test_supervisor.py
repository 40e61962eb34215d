"""memory_platform/supervisor.py: `runplatform` restarts a child that exits, with backoff, a line to
the terminal and a count that /readyz and the admin dashboard show."""

import sys
import time

import pytest

from harness.processes import wait_for
from memory_platform.supervisor import Child, Supervisor, supervisor_status

pytestmark = pytest.mark.django_db


def test_a_child_that_exits_is_restarted_with_backoff_and_counted(tmp_path, settings, client):
    state = tmp_path / "run" / "supervisor.json"
    settings.SUPERVISOR_STATE_FILE = str(state)
    lines = []
    failing = Child(
        name="worker",
        argv=[sys.executable, "-c", "print('ERROR/MainProcess boom', flush=True); raise SystemExit(3)"],
        log_path=tmp_path / "worker.log",
        env={},
    )
    steady = Child(
        name="web", argv=[sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "web.log", env={}
    )
    supervisor = Supervisor(children=[failing, steady], state_path=state, say=lines.append)
    supervisor.start()
    try:

        def restarted(times):
            supervisor.poll()
            return failing.restarts >= times

        wait_for(lambda: restarted(1), timeout=10, interval=0.1, message="the first restart")
        first = time.monotonic()
        wait_for(lambda: restarted(2), timeout=10, interval=0.1, message="the second restart")
        assert time.monotonic() - first >= 0.9, "the second failure in a row waits (1 s, then 2 s …)"
    finally:
        supervisor.stop()
        assert not state.exists(), "a stopped platform leaves no state behind"
    assert any(line.startswith("worker exited with code 3") and "restart 1" in line for line in lines)
    assert "[worker] ERROR/MainProcess boom" in lines, "a child's errors reach the terminal"
    assert steady.restarts == 0


def test_readyz_and_the_dashboard_show_the_restarts(tmp_path, settings, client, admin_client):
    state = tmp_path / "supervisor.json"
    settings.SUPERVISOR_STATE_FILE = str(state)
    supervisor = Supervisor(
        children=[
            Child(name="beat", argv=[sys.executable, "-c", "raise SystemExit(1)"], log_path=tmp_path / "b.log", env={})
        ],
        state_path=state,
        say=lambda line: None,
    )
    supervisor.start()
    wait_for(
        lambda: supervisor.poll() or supervisor.children[0].restarts, timeout=10, interval=0.1, message="a restart"
    )
    supervisor.children[0].process.wait()
    supervisor.write_state()

    assert supervisor_status()["beat"]["restarts"] >= 1
    assert client.get("/readyz").json()["processes"]["beat"]["restarts"] >= 1
    page = admin_client.get("/admin/").content.decode()
    assert "Processes (make run)" in page and "beat: restarts" in page
    supervisor.stop()
