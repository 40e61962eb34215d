"""The OpenAPI schema tells the truth (issue 17): schemathesis runs every check on every operation
against a live server. What the schema allows must be accepted, what it forbids refused, every
answer must be documented and match its schema, and nothing may answer 5xx.

`make test` runs a bounded budget (FUZZ_MAX_EXAMPLES, default 10 per operation, fixed seed);
`make fuzz` runs this test alone with a larger one.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import ClientFactory

ST = Path(sys.executable).with_name("st")
CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.fixture
def fuzz_client(transactional_db, add_messages):
    """A client that may do everything, with a session to find (and seal, distil, erase)."""
    client = ClientFactory(can_erase=True, can_export=True, can_manage_webhooks=True)
    add_messages(client, user_id="0", session_id="0", session_tag="task")
    return client


def test_every_operation_passes_every_check(live_server, fuzz_client, tmp_path, settings):
    # A webhook URL whose host is loopback or private is refused by policy (egress filtering), which no
    # schema can state; schemathesis's stateful phase feeds the live server's own URLs (localhost) into
    # webhook URLs. Every network is allowed here, as a single-tenant operator may allow them; the
    # refusal itself is tested in tests/webhooks/test_egress.py.
    settings.WEBHOOK_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    examples = os.environ.get("FUZZ_MAX_EXAMPLES", "10")
    command = [
        str(ST),
        "--config-file",
        str(CONFIG),
        "run",
        f"{live_server.url}/api/schema/",
        "--header",
        f"Authorization: Api-Key {fuzz_client.raw_key}",
        "--checks",
        "all",
        "--max-examples",
        examples,
        "--seed",
        os.environ.get("FUZZ_SEED", "1"),
        "--workers",
        "1",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    output = result.stdout + result.stderr
    summary = re.search(r"(\d+) generated, .*", output)
    print(summary.group(0) if summary else output[-3000:])  # shown with -rA or on failure
    assert result.returncode == 0, output[-20000:]
    tested = re.search(r"Tested: (\d+)", output)
    assert tested and int(tested.group(1)) == 61, output[-3000:]  # every /api/v1/ operation
    assert summary and int(summary.group(1)) > 0
