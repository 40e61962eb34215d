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
from typing import get_args

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.core.management import call_command
from django.db import connections
from memory_platform_client import Retries, errors
from memory_platform_client.client import MemoryClient as PythonClient
from memory_platform_client.contract import TOOLS_BY_NAME
from memory_platform_client.messages import Role

from memory_platform.celery import app
from tests.factories import ClientFactory

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
EXAMPLE = ROOT / "examples" / "vercel-ai-sdk"
STAMP = Path("node_modules") / ".installed-lock-sha256"
MAX_SAFE_INTEGER = 2**53 - 1
AI_TOOLS = ("add_memory", "search_memory", "get_context", "retrieve_skills")
# Every test of the node suite runs here: `node --test` reports each file's tests (and the describe
# blocks) in its TAP summary; a skip means a key was not given, which this run always gives.
SUMMARY = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$", re.MULTILINE)


def run(
    *command: str, timeout: float = 300, env: dict | None = None, cwd: Path = PACKAGE
) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def npm_ci(directory: Path) -> None:
    """`npm ci` from the committed lockfile, once per lockfile (a stamp holds its hash)."""
    lock = hashlib.sha256((directory / "package-lock.json").read_bytes()).hexdigest()
    stamp = directory / STAMP
    if not stamp.exists() or stamp.read_text() != lock:
        succeeded(run("npm", "ci", "--no-audit", "--no-fund", timeout=600, cwd=directory), f"npm ci in {directory}")
        stamp.write_text(lock)


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
    version = succeeded(run("node", "--version", timeout=30), "node --version").stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 20:
        pytest.fail(
            f"Node.js {version} is too old: the TypeScript SDK needs Node.js 20+ (global fetch, AbortSignal.any)."
        )
    npm_ci(PACKAGE)
    succeeded(run("node", "node_modules/typescript/bin/tsc", "-p", "."), "tsc")
    return shutil.which("node")


def node_json(node: str, script: str):
    """What a module script printed as JSON, run in the package against its build."""
    return json.loads(succeeded(run(node, "--input-type=module", "-e", script, timeout=60), "node").stdout)


# The node suite against the live platform -------------------------------------------------------------


def close_connections(**_signal) -> None:
    connections.close_all()


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
    files = sorted(str(path.relative_to(PACKAGE)) for path in (PACKAGE / "dist" / "test").glob("*.test.js"))
    app.control.purge()  # wake-ups earlier tests left in the suite's Redis database
    # The worker thread's database session would outlive it (CONN_MAX_AGE) and keep the test database
    # from being dropped: it is closed after each task, in that thread.
    task_postrun.connect(close_connections, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            result = run(node, "--test", "--test-reporter=tap", *files, timeout=600, env=env)
    finally:
        task_postrun.disconnect(close_connections)
    output = f"{result.stdout}\n{result.stderr}"
    counts = {name: int(value) for name, value in SUMMARY.findall(result.stdout)}

    assert result.returncode == 0, output
    assert counts["fail"] == 0 and counts["cancelled"] == 0 and counts["skipped"] == 0, output
    assert counts["pass"] >= 25, output


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_ai_sdk_example_learns_across_runs(node, live_server, client_a, settings):
    """examples/vercel-ai-sdk: three customers' runs teach the refund workflow (task sessions sealed
    `success` by the middleware); the fourth customer's prompt holds the skill and their fact, and the
    scripted model, following it, makes no failed call; the skill is recorded as applied."""
    settings.EVOLUTION_DEBOUNCE_SECONDS = 0
    npm_ci(EXAMPLE)
    env = {"PATH": shutil.os.environ["PATH"], "MEMORY_PLATFORM_URL": live_server.url}
    env["MEMORY_PLATFORM_API_KEY"] = client_a.raw_key
    app.control.purge()
    task_postrun.connect(close_connections, weak=False)
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            result = run(node, "agent.mjs", timeout=300, env=env, cwd=EXAMPLE)
    finally:
        task_postrun.disconnect(close_connections)
    output = f"{result.stdout}\n{result.stderr}"
    runs = re.findall(r"^run (\d) \((\w+)-\w+\): (.+)$", result.stdout, re.MULTILINE)

    assert result.returncode == 0, output
    assert runs == [
        ("1", "alice", "no skill yet; calls: issue_refund ✗, find_order, check_refund_policy, issue_refund"),
        ("2", "bob", "no skill yet; calls: issue_refund ✗, find_order, check_refund_policy, issue_refund"),
        ("3", "carol", "no skill yet; calls: issue_refund ✗, find_order, check_refund_policy, issue_refund"),
        ("4", "dave", "skill in the prompt; calls: find_order, check_refund_policy, issue_refund"),
    ], output
    assert "[1] Refund preference: Dave wants refunds on his original card." in result.stdout


# What holds the package to the platform and to the Python SDK ----------------------------------------


def test_the_schema_types_are_the_platforms_openapi_schema(node, tmp_path):
    """src/schema.ts is generated from the OpenAPI schema; regenerate it when the API changes:
    `.venv/bin/python manage.py spectacular --format openapi-json --file /tmp/schema.json` then
    `node scripts/generate-schema.mjs /tmp/schema.json` in clients/typescript."""
    schema = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    generated = tmp_path / "schema.ts"
    succeeded(run(node, "scripts/generate-schema.mjs", str(schema), str(generated)), "generate-schema")

    assert generated.read_text() == (PACKAGE / "src" / "schema.ts").read_text(), (
        "clients/typescript/src/schema.ts is not the platform's schema: "
        + test_the_schema_types_are_the_platforms_openapi_schema.__doc__
    )


def test_the_tool_table_is_the_python_sdks():
    """src/contract.ts is generated from memory_platform_client.contract."""
    result = subprocess.run(
        [sys.executable, str(PACKAGE / "scripts" / "generate_contract.py")], capture_output=True, text=True, timeout=60
    )

    assert result.stdout == (PACKAGE / "src" / "contract.ts").read_text(), (
        "clients/typescript/src/contract.ts is stale: regenerate it with "
        "`.venv/bin/python clients/typescript/scripts/generate_contract.py > clients/typescript/src/contract.ts`"
    )


# What a README snippet uses without defining it (shown earlier in the README, or the reader's own).
SNIPPET_GIVENS = {
    "memory": 'import type { MemoryClient as GivenClient } from "@memory-platform/client";\n'
    "declare const memory: GivenClient;",
    # a provider's model, as `wrapLanguageModel` takes it
    "model": 'import type { wrapLanguageModel as givenWrap } from "ai";\n'
    'declare const model: Parameters<typeof givenWrap>[0]["model"];',
    "tools": 'import type { ToolSet as GivenTools } from "ai";\ndeclare const tools: GivenTools;',
}


def readme_snippets() -> dict[str, str]:
    """Each ```ts block of the README and of the package's README, by a file name, with the declarations of
    what it uses without defining."""
    snippets = {}
    for readme in (ROOT / "README.md", PACKAGE / "README.md"):
        for number, code in enumerate(re.findall(r"```ts\n(.*?)```", readme.read_text(), re.DOTALL), 1):
            defined = set(re.findall(r"\b(?:const|let|var)\s+(\w+)", code))
            defined |= {
                name for names in re.findall(r"import[^;]*?\{([^}]*)\}", code) for name in re.findall(r"\w+", names)
            }
            givens = [
                given
                for name, given in SNIPPET_GIVENS.items()
                if re.search(rf"\b{name}\b", code) and name not in defined
            ]
            snippets[f"{readme.relative_to(ROOT).as_posix().replace('/', '_').lower()}_{number}.ts"] = "\n".join(
                [*givens, code]
            )
    return snippets


def test_the_readme_snippets_type_check(node):
    """Every ```ts block of the README and of the package's README compiles against the built package
    (imported by its name, as an application does), with what it takes from the reader declared."""
    snippets = readme_snippets()
    folder = PACKAGE / "readme-snippets"
    folder.mkdir(exist_ok=True)
    try:
        for name, code in snippets.items():
            (folder / name).write_text(code)
        config = {
            "extends": "../tsconfig.json",
            "compilerOptions": {"noEmit": True, "rootDir": ".", "noUnusedLocals": False},
            "include": ["*.ts"],
        }
        (folder / "tsconfig.json").write_text(json.dumps(config))
        result = run(node, "node_modules/typescript/bin/tsc", "-p", f"{folder.name}/tsconfig.json")
    finally:
        shutil.rmtree(folder)

    assert len(snippets) >= 4
    assert result.returncode == 0, result.stdout + result.stderr


def test_tsc_refuses_a_path_or_method_the_schema_lacks(node, tmp_path):
    """Every call names a schema path and method, checked by the compiler: a copy of the client with one
    path or one method changed does not build."""
    sources = ("client.ts", "errors.ts", "http.ts", "schema.ts", "version.ts")
    command = (node, "node_modules/typescript/bin/tsc", "--noEmit", "--strict", "--target", "ES2022")
    options = ("--module", "NodeNext", "--lib", "ES2023,DOM,DOM.Iterable", "--types", "node")
    options += ("--typeRoots", str(PACKAGE / "node_modules" / "@types"))
    changes = {
        "intact": (None, None),
        "path": ('"/api/v1/skills/retrieve"', '"/api/v1/skills/retrieval"'),
        "method": ('call("GET", "/api/v1/me"', 'call("POST", "/api/v1/me"'),
    }
    refused = {}
    for name, (old, new) in changes.items():
        copy = tmp_path / name
        copy.mkdir()
        for source in sources:
            text = (PACKAGE / "src" / source).read_text()
            if source == "client.ts" and old:
                assert old in text
                text = text.replace(old, new)
            (copy / source).write_text(text)
        result = run(*command, *options, *(str(copy / source) for source in sources))
        refused[name] = result.returncode != 0
        if name == "intact":
            succeeded(result, "tsc on the copy")

    assert refused == {"intact": False, "path": True, "method": True}


SURFACE = """
import * as sdk from "./dist/src/index.js";
import { memoryTools } from "./dist/src/ai.js";
import { asSchema } from "ai";

const methods = (value) => {
  const names = new Set();
  for (let proto = Object.getPrototypeOf(value); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== "constructor" && typeof value[name] === "function") names.add(name);
    }
  }
  return [...names].sort();
};
const client = new sdk.MemoryClient("http://127.0.0.1:9", "mp_key");
const surface = { "": methods(client) };
for (const [name, value] of Object.entries(client)) {
  if (value && typeof value === "object" && Object.getPrototypeOf(value) !== Object.prototype) surface[name] = methods(value);
}
const errors = Object.entries(sdk)
  .filter(([, value]) => value === sdk.MemoryPlatformError || value?.prototype instanceof sdk.MemoryPlatformError)
  .map(([name]) => name)
  .sort();
const byStatus = Object.fromEntries(
  [400, 401, 402, 403, 404, 405, 408, 409, 410, 413, 415, 422, 429, 500, 502, 503, 504].map((status) => [
    status,
    sdk.errorFromBody(status, null).name,
  ]),
);
const tools = {};
for (const [fixed, options] of [["user", { userId: "u" }], ["user+session", { userId: "u", sessionId: "s" }]]) {
  tools[fixed] = Object.fromEntries(
    Object.entries(memoryTools(client, options)).map(([name, tool]) => [
      name,
      { description: tool.description, title: tool.title, schema: asSchema(tool.inputSchema).jsonSchema },
    ]),
  );
}
console.log(JSON.stringify({ surface, errors, byStatus, retries: sdk.DEFAULT_RETRIES, version: sdk.VERSION, tools }));
"""


@pytest.fixture(scope="module")
def typescript(node):
    return node_json(node, SURFACE)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def python_surface() -> dict:
    """The Python `MemoryClient`'s methods and its sub-clients', named as TypeScript names them."""
    with PythonClient("http://127.0.0.1:9", "mp_key") as client:

        def methods(value) -> list[str]:
            names = [name for name in dir(value) if not name.startswith("_") and callable(getattr(value, name))]
            return sorted(camel(name) for name in names)

        surface = {"": [name for name in methods(client) if name not in LIFECYCLE]}
        for name, value in vars(client).items():
            if type(value).__module__ == PythonClient.__module__:
                surface[name] = methods(value)
    return surface


LIFECYCLE = {"close"}  # a fetch-based client holds no connection pool to close


def test_the_methods_are_the_python_sdks(typescript):
    assert typescript["surface"] == python_surface()


def test_every_tool_of_the_table_has_its_sdk_method(typescript):
    surface = typescript["surface"]
    missing = []
    for tool in TOOLS_BY_NAME.values():
        owner, _, method = tool.sdk.rpartition(".")
        if camel(method) not in surface.get(owner, []):
            missing.append(tool.sdk)
    assert missing == []


def test_the_errors_and_the_retry_policy_are_the_python_sdks(typescript):
    python_errors = sorted(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.MemoryPlatformError)
    )
    by_status = {
        str(status): type(errors.error_from_body(status, None)).__name__ for status in map(int, typescript["byStatus"])
    }
    policy = Retries()

    assert typescript["errors"] == python_errors
    assert typescript["byStatus"] == by_status
    assert typescript["retries"] == {
        "maxRetries": policy.max_retries,
        "backoffMs": policy.backoff * 1000,
        "maxBackoffMs": policy.max_backoff * 1000,
        "maxRetryAfterMs": policy.max_retry_after * 1000,
    }
    assert typescript["version"] == json.loads((PACKAGE / "package.json").read_text())["version"]


def expected_property(arg) -> dict:
    """What the zod schema of a table argument says, as JSON Schema."""
    if arg.type == "messages":
        return {"type": "array", "minItems": arg.minimum, "description": arg.description}
    node: dict = {"type": {"integer": "integer", "boolean": "boolean", "object": "object"}.get(arg.type, "string")}
    if arg.enum:
        node["enum"] = list(arg.enum)
    if arg.type == "integer":
        node.update(
            {key: value for key, value in (("minimum", arg.minimum), ("maximum", arg.maximum)) if value is not None}
        )
    if arg.many:
        node = {"type": "array", "items": node}
        node.update(
            {key: value for key, value in (("minItems", arg.minimum), ("maxItems", arg.maximum)) if value is not None}
        )
    node["description"] = arg.description
    if not arg.required and arg.default_for_tool is not None:
        node["default"] = arg.default_for_tool
    return node


@pytest.mark.parametrize("fixed", ["user", "user+session"])
@pytest.mark.parametrize("name", AI_TOOLS)
def test_the_ai_tools_offer_the_tables_arguments(typescript, fixed, name):
    tool = TOOLS_BY_NAME[name]
    offered = typescript["tools"][fixed][name]
    taken = {"user_id"} | ({"session_id"} if fixed == "user+session" else set())
    args = [arg for arg in tool.tool_args if arg.name not in taken]
    properties = offered["schema"]["properties"]

    assert (offered["title"], offered["description"]) == (tool.title, tool.description)
    assert list(properties) == [arg.name for arg in args]
    assert offered["schema"].get("required", []) == [arg.name for arg in args if arg.required]
    for arg in args:
        found = dict(properties[arg.name])
        if arg.type == "messages":
            assert found.pop("items")["properties"]["role"]["enum"] == list(get_args(Role))
        elif arg.type == "object":
            assert found.pop("additionalProperties") == {}
            found.pop("propertyNames")
        elif arg.type == "integer":
            # zod's int() states the safe-integer range where the table gives no bound
            found = {
                key: value
                for key, value in found.items()
                if not (key in ("minimum", "maximum") and abs(value) == MAX_SAFE_INTEGER)
            }
        assert found == expected_property(arg), arg.name
