"""The README's five-minute tour, run as written against `manage.py runplatform` (what `make run`
starts) with the shipped defaults: its shell blocks through bash and curl, its Python block through
the SDK, its MCP step through the official MCP client. Only the addresses and the key are filled in;
each `# {...}` line under a command is the answer the README promises, and every complete
`"field": value` pair in it must be in the answer received."""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.platforms import RunPlatform
from tests.mcp_server.mcp_client import http_transport, run

README = Path(__file__).resolve().parent.parent / "README.md"
README_API, README_MCP = "http://127.0.0.1:8000", "http://127.0.0.1:8001/mcp"
NUMBERS = {"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20}

pytestmark = pytest.mark.worker


def tour() -> str:
    text = README.read_text()
    return text[text.index("## A five-minute tour") : text.index("## Concepts")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", tour(), flags=re.S)


def promised(comment: str) -> dict:
    """The complete `"field": scalar` pairs of a README answer line (the rest is elided with …)."""
    pairs = re.findall(r'"(\w+)": ("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|null|true|false)', comment)
    return {field: json.loads(value) for field, value in pairs if value != '"…"'}


def assert_answer(answer: dict, comment: str) -> None:
    """Each promised pair is a field of the answer or of the first item of its list."""
    expected = promised(comment)
    assert expected, comment
    first = next((value[0] for value in answer.values() if isinstance(value, list) and value), {})
    for field, value in expected.items():
        got = answer[field] if field in answer else first.get(field)
        assert got == value, f"README promises {field}={value!r}; the platform answered {got!r}: {answer}"


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    assert shutil.which("curl"), "the README's tour uses curl; install it to run this test"
    platform = RunPlatform(tmp_path_factory.mktemp("tour"), shipped_defaults=True).start()
    yield platform
    platform.stop()


def shell(platform, script: str, key: str = "") -> str:
    script = script.replace(README_API, platform.url).replace(README_MCP, platform.mcp_url)
    completed = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=README.parent,
        env={**platform.base_env(), "KEY": key, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr + completed.stdout
    return completed.stdout


def commands_and_answers(block: str) -> list[tuple[str, str]]:
    """A block's commands, each with the `# {...}` answer line that follows it ('' if none)."""
    pairs, command = [], []
    for line in block.splitlines():
        if line.startswith("#"):
            if command:
                pairs.append(("\n".join(command), line if line.startswith("# {") else ""))
                command = []
            elif line.startswith("#   ") and pairs:
                pairs[-1] = (pairs[-1][0], pairs[-1][1] + line[1:])
        else:
            command.append(line)
    if command:
        pairs.append(("\n".join(command), ""))
    return pairs


def test_the_readme_tour_works_as_written(platform):
    key_block, add_block, search_block, skill_block, mcp_block = blocks("bash")
    (python_block,) = blocks("python")

    # 1. A key: the tour's two commands, then `KEY=mp_...` stands for the key they printed.
    setup, key_line = key_block.rsplit("\n", 2)[0], key_block.rsplit("\n", 2)[1]
    assert key_line == "KEY=mp_...", key_line
    printed = shell(platform, setup)
    key = re.search(r"API key \(shown once, store it now\): (mp_\S+)", printed).group(1)

    # 2. Add a conversation: 202.
    assert "task_ids" in json.loads(shell(platform, add_block, key)), "memory/add answers with its tasks"

    # 3. Search it, right away and as written.
    ((command, answer),) = commands_and_answers(search_block)
    assert_answer(json.loads(shell(platform, command, key)), answer)

    # 4. A task session, then "a few seconds later" the skill: retried as a user would, for a minute.
    (add, _), (retrieve, answer) = commands_and_answers(skill_block)
    shell(platform, add, key)
    deadline, skills = time.monotonic() + 60, {}
    while time.monotonic() < deadline:
        skills = json.loads(shell(platform, retrieve, key))
        if skills["skills"]:
            break
        time.sleep(1)
    assert_answer(skills, answer)

    # 5. MCP: the same key at /mcp, with as many tools as the README counts.
    count = NUMBERS[re.search(r"(\w+) tools, among them", tour()).group(1)]
    assert '--header "Authorization: Api-Key $KEY"' in mcp_block
    connect = http_transport(platform.mcp_url, {"Authorization": f"Api-Key {key}"})

    async def tool_names(session):
        return {tool.name for tool in (await session.list_tools()).tools}

    names = run(connect, tool_names)
    assert len(names) == count, sorted(names)
    assert set(re.findall(r"`(\w+)`", tour().split("tools, among them", 1)[1].split("(", 1)[0])) <= names

    # 6. The Python SDK, its block as written with the address and key filled in.
    script = python_block.replace(README_API, platform.url).replace('api_key="mp_..."', f'api_key="{key}"')
    script += '\nprint(__import__("json").dumps({"hits": hits, "skills": skills}))\n'
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.splitlines()[-1])
    assert any(hit["content"] == "My sister lives in Lisbon" for hit in result["hits"])
    assert result["skills"], "the SDK's retrieve_skills finds the skill the tour taught"
