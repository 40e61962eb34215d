"""The documentation names only what exists: every setting in docs/configuration.md is read by the
settings and every setting read from the environment is documented there; every `manage.py`
command, `make` target and benchmark the README and docs/ name exists; the layer table of
docs/architecture.md is the layer contract import-linter checks, and its registry table is every
registry of apps/; the README stays a front door and bench/README.md opens with every benchmark's
current figure."""

import ast
import re
import tomllib
from pathlib import Path

from django.core.management import get_commands

BASE_DIR = Path(__file__).resolve().parent.parent
SETTINGS_FILE = BASE_DIR / "memory_platform" / "settings" / "__init__.py"
SERVER_CONFIG = BASE_DIR / "gunicorn.conf.py"  # the web server's own settings, read with os.environ
CONFIGURATION = BASE_DIR / "docs" / "configuration.md"
DOCUMENTS = [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").glob("*.md")), BASE_DIR / "bench" / "README.md"]
ARCHITECTURE = BASE_DIR / "docs" / "architecture.md"
README = BASE_DIR / "README.md"
BENCH_README = BASE_DIR / "bench" / "README.md"
README_MAX_LINES = 150  # a front door: one screen of what it is, two commands and the tour; the rest is in docs/


def environment_settings() -> set[str]:
    """Names the settings module reads with `env(...)`, `env.int(...)`, `env.db(...)`…, and the
    ones gunicorn.conf.py reads."""
    names = set()
    for node in ast.walk(ast.parse(SETTINGS_FILE.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        function = node.func
        reads_env = (isinstance(function, ast.Name) and function.id == "env") or (
            isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) and function.value.id == "env"
        )
        first = node.args[0]
        if reads_env and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names | set(re.findall(r"os\.environ\.get\(\"([A-Z][A-Z0-9_]+)\"", SERVER_CONFIG.read_text()))


def documented_settings() -> set[str]:
    """The names in the first cell of each table row of docs/configuration.md."""
    names = set()
    for line in CONFIGURATION.read_text().splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


def test_the_settings_reader_is_found():
    assert {"SECRET_KEY", "DATABASE_URL", "EMBEDDING_PROVIDER", "RERANKER"} <= environment_settings()


def test_every_documented_setting_exists():
    assert sorted(documented_settings() - environment_settings()) == []


def test_every_setting_read_from_the_environment_is_documented():
    assert sorted(environment_settings() - documented_settings()) == []


def test_every_management_command_named_in_the_docs_exists():
    named = {
        (document.name, command)
        for document in DOCUMENTS
        for command in re.findall(r"manage\.py\s+([a-z_]+)", document.read_text())
    }
    assert named, "the docs name no manage.py command: the pattern is stale"
    assert sorted((document, command) for document, command in named if command not in get_commands()) == []


def test_every_make_target_named_in_the_docs_exists():
    targets = set(re.findall(r"^([a-z][a-z-]*):", (BASE_DIR / "Makefile").read_text(), flags=re.MULTILINE))
    named = {
        (document.name, target)
        for document in DOCUMENTS
        for target in re.findall(r"`make ([a-z][a-z-]*)", document.read_text())
    }
    assert sorted((document, target) for document, target in named if target not in targets) == []


def test_every_benchmark_named_in_the_docs_runs_under_that_name():
    from bench.__main__ import BENCHMARKS, GROUPS, runner

    named = {
        (document.name, name)
        for document in DOCUMENTS
        for names in re.findall(r"python -m bench((?: [a-z][a-z0-9_]*)+)", document.read_text())
        for name in names.split()
    }
    assert {name for _, name in named} >= {"locomo", "pipeline_e2e", "privacy"}, "the pattern is stale"
    assert sorted((document, name) for document, name in named if name not in {**BENCHMARKS, **GROUPS}) == []
    for name in {**BENCHMARKS, **GROUPS}:
        assert callable(runner(name)), f"{name}: its module has no run(output_dir)"


def documented_layers(text: str) -> list[set[str]]:
    """The packages of each row of the "Apps and layers" table, top layer first, as dotted names."""
    section = text.split("## Apps and layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            packages = {path.strip("/").replace("/", ".") for path in re.findall(r"`([a-z_/]+)`", cells[1])}
            rows.append((int(cells[0]), packages))
    return [packages for _, packages in sorted(rows, key=lambda row: -row[0])]


def contract_layers(pyproject: dict) -> list[set[str]]:
    """The layers of import-linter's layers contract, top first; `a | b` is one layer of two."""
    (contract,) = [c for c in pyproject["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [{package.strip() for package in layer.split("|")} for layer in contract["layers"]]


def test_the_layer_table_is_the_layer_contract():
    documented = documented_layers(ARCHITECTURE.read_text())
    contract = contract_layers(tomllib.loads((BASE_DIR / "pyproject.toml").read_text()))
    assert documented and contract, "a parser found nothing: the table or the contract moved"
    assert documented == contract


def test_the_layer_comparison_fails_when_the_table_leaves_a_package_out():
    table = """## Apps and layers

| layer | package | what lives there |
|---|---|---|
| 2 | `memory_platform/` | the project |
| 1 | `apps/search/`, `apps/skills/` | search; skills |
| 0 | `apps/core/` | the base |

## Next
"""
    pyproject = {
        "tool": {
            "importlinter": {
                "contracts": [
                    {"type": "forbidden"},
                    {"type": "layers", "layers": ["memory_platform", "apps.search | apps.skills", "apps.core"]},
                ]
            }
        }
    }
    assert documented_layers(table) == contract_layers(pyproject)
    pyproject["tool"]["importlinter"]["contracts"][1]["layers"].insert(1, "apps.context | apps.portability")
    assert documented_layers(table) != contract_layers(pyproject)


def documented_registries(text: str) -> set[tuple[str, str]]:
    """(module, function) of each row of the "Registries" table whose module is in apps/."""
    section = text.split("## Registries", 1)[1].split("\n## ", 1)[0]
    named = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > 2 and (module := re.fullmatch(r"`(apps\.[\w.]+)`", cells[1])):
            named |= {(module.group(1), function) for function in re.findall(r"`(\w+)`", cells[2])}
    return named


def code_registries() -> set[tuple[str, str]]:
    """(module, function) of every module-level `register_*` of apps/ that fills a registry: one that
    only calls other `register_*` functions (an app registering its own things) is not one."""
    found = set()
    for path in sorted((BASE_DIR / "apps").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("register_"):
                called = {
                    getattr(call.func, "id", getattr(call.func, "attr", ""))
                    for call in ast.walk(node)
                    if isinstance(call, ast.Call)
                }
                if not any(name.startswith("register_") for name in called):
                    module = ".".join(path.relative_to(BASE_DIR).with_suffix("").parts)
                    found.add((module, node.name))
    return found


def test_the_registry_table_is_every_registry_of_the_apps():
    documented = documented_registries(ARCHITECTURE.read_text())
    code = code_registries()
    assert len(code) >= 12, "the finder found fewer registries than there were when it was written"
    assert sorted(code - documented) == [], "a registry missing from docs/architecture.md"
    assert sorted(documented - code) == [], "a documented registry that is not in the code"


def test_the_readme_is_a_front_door():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the detail into docs/"


def test_the_bench_readme_opens_with_a_current_figure_for_every_benchmark():
    from bench.__main__ import BENCHMARKS

    table = BENCH_README.read_text().split("## Current figures", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`|]*python -m bench [^`|]*)` \|", table, flags=re.M)
    assert {name for name, _ in rows} == set(BENCHMARKS), "each benchmark has one row, with its command"
    assert all(f"python -m bench {name}" in command for name, command in rows)
