"""The TypeScript SDK (clients/typescript): its node test suite against the live platform with a real
Celery worker, and the checks that hold it to the platform and to the Python SDK: the types generated
from the OpenAPI schema, the tool table it builds its Vercel AI SDK tools from, and its method, error
and retry-policy lists against the Python SDK's.

Node.js (20+) and npm come from the machine; `npm ci` installs the committed lockfile once (a stamp
holds the lockfile's hash) and `tsc` builds the package before the tests below use it."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.management import call_command
from memory_platform_client import Retries, errors
from memory_platform_client.client import MemoryClient as PythonClient
from memory_platform_client.contract import TOOLS_BY_NAME

from memory_platform.celery import app
from tests.factories import ClientFactory

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
INSTALLED = PACKAGE / "node_modules" / ".installed-lock-sha256"
AI_TOOLS = ("add_memory", "search_memory", "get_context", "retrieve_skills")
# Every test of the node suite runs here: `node --test` reports each file's tests (and the describe
# blocks) in its TAP summary; a skip means a key was not given, which this run always gives.
SUMMARY = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$", re.MULTILINE)


def run(*command: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, env=env)


def succeeded(result: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="session")
def node() -> str:
    """`node`, after `npm ci` (when the lockfile changed) and `tsc`."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(
                f"`{tool}` is not on PATH. The TypeScript SDK's tests need Node.js 20+ and npm from the machine "
                "(e.g. `apt-get install nodejs npm`); nothing here downloads them."
            )
    lock = hashlib.sha256((PACKAGE / "package-lock.json").read_bytes()).hexdigest()
    if not INSTALLED.exists() or INSTALLED.read_text() != lock:
        succeeded(run("npm", "ci", "--no-audit", "--no-fund", timeout=600), "npm ci")
        INSTALLED.write_text(lock)
    succeeded(run("node", "node_modules/typescript/bin/tsc", "-p", "."), "tsc")
    return shutil.which("node")


def node_json(node: str, script: str):
    """What a module script printed as JSON, run in the package against its build."""
    return json.loads(succeeded(run(node, "--input-type=module", "-e", script, timeout=60), "node").stdout)


# The node suite against the live platform -------------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_node_suite_passes_against_the_live_platform(node, live_server, client_a, settings):
    # A conversation's extraction stays queued long enough for the waiting test to time out on it; a
    # task session's skill is evolved as soon as its lessons are stored.
    settings.EXTRACTION_DEBOUNCE_SECONDS = 60
    settings.EVOLUTION_DEBOUNCE_SECONDS = 0
    organization = client_a.organization
    reader = ClientFactory(organization=organization, write_scope=None, read_scopes=["default"])
    eraser = ClientFactory(organization=organization, write_scope=None, read_scopes=["default"], can_erase=True)
    erasable = ClientFactory(organization=organization)
    env = {
        "PATH": shutil.os.environ["PATH"],
        "MEMORY_PLATFORM_URL": live_server.url,
        "MEMORY_PLATFORM_API_KEY": client_a.raw_key,
        "MEMORY_PLATFORM_READ_ONLY_API_KEY": reader.raw_key,
        "MEMORY_PLATFORM_ERASER_API_KEY": eraser.raw_key,
        "MEMORY_PLATFORM_ERASABLE_CLIENT_ID": str(erasable.pk),
    }
    app.control.purge()  # wake-ups earlier tests left in the suite's Redis database
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        files = sorted(str(path.relative_to(PACKAGE)) for path in (PACKAGE / "dist" / "test").glob("*.test.js"))
        result = run(node, "--test", "--test-reporter=tap", *files, timeout=600, env=env)
    output = f"{result.stdout}\n{result.stderr}"
    counts = {name: int(value) for name, value in SUMMARY.findall(result.stdout)}

    assert result.returncode == 0, output
    assert counts["fail"] == 0 and counts["cancelled"] == 0 and counts["skipped"] == 0, output
    assert counts["pass"] >= 25, output
