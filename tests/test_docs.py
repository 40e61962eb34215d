"""The documentation names only what exists: every setting in docs/configuration.md is read by the
settings and every setting read from the environment is documented there; every `manage.py`
command and `make` target the README and docs/ name exists."""

import ast
import re
from pathlib import Path

from django.core.management import get_commands

BASE_DIR = Path(__file__).resolve().parent.parent
SETTINGS_FILE = BASE_DIR / "memory_platform" / "settings" / "__init__.py"
SERVER_CONFIG = BASE_DIR / "gunicorn.conf.py"  # the web server's own settings, read with os.environ
CONFIGURATION = BASE_DIR / "docs" / "configuration.md"
DOCUMENTS = [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").glob("*.md")), BASE_DIR / "bench" / "README.md"]


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
