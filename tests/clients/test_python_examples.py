"""The Python agent examples in examples/, run as a user would (`python examples/<name>.py`) against a
whole platform in real processes (`manage.py runplatform`: web, Celery worker and beat, a private
PostgreSQL and redis-server; the rules LLM and hash embeddings, so nothing leaves the machine). Each
example checks itself (exit status): three runs teach a workflow, the fourth run's prompt carries it and
a fact stored for the user, and the exchange is searchable within 10 s."""

import subprocess
import sys

import pytest

from harness.platforms import RunPlatform
from harness.processes import BASE_DIR

pytestmark = pytest.mark.worker

EXAMPLES = ["langchain_agent.py", "openai_agents_agent.py", "langgraph_agent.py", "google_adk_agent.py"]


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    platform = RunPlatform(tmp_path_factory.mktemp("examples")).start()
    yield platform
    platform.stop()


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_example_learns_across_runs(platform, example):
    # Each example is its own user of the platform: a fresh key, so one example's skills are not another's.
    env = {**platform.base_env(), "MEMORY_PLATFORM_URL": platform.url, "MEMORY_PLATFORM_API_KEY": platform.api_key}
    completed = subprocess.run(
        [sys.executable, str(BASE_DIR / "examples" / example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr + platform.logs_text()
    assert completed.stdout.rstrip().endswith("ok: fact and skill in the prompt; the exchange is searchable")
