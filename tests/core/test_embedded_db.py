"""The embedded PostgreSQL: concurrent starts are safe and the last process out stops it."""

import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "memory_platform.settings"
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'plpgsql'")
    assert cursor.fetchone()
print("ok")
"""


def servers_for(pgdata: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and str(pgdata) in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


def test_concurrent_starts_share_one_server_that_stops_with_the_last_process(tmp_path):
    env = {"DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", PROBE], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr[-2000:]
        assert stdout.strip() == "ok"
    pgdata = (tmp_path / "pgdata").resolve()
    assert (pgdata / "PG_VERSION").exists()
    deadline = time.monotonic() + 15
    while servers_for(pgdata) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert servers_for(pgdata) == [], "the embedded server outlived every process that used it"


SETUP_ONLY = """
import os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "memory_platform.settings"
django.setup()
from django.conf import settings
print(settings.DATABASES["default"]["HOST"] or "no host")
"""


def test_importing_the_settings_starts_no_server_and_the_first_connection_does(tmp_path):
    env = {"DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    setup = subprocess.run(
        [sys.executable, "-c", SETUP_ONLY], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert setup.returncode == 0, setup.stderr[-2000:]
    assert setup.stdout.strip() == "no host"
    assert not (tmp_path / "pgdata" / "PG_VERSION").exists()  # no cluster was even created

    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.strip() == "ok"
    assert (tmp_path / "pgdata" / "PG_VERSION").exists()
