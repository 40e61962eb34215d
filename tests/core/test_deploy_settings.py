"""`manage.py check --deploy` under the documented production settings (production.env.example)."""

import os
import secrets
import subprocess
import sys

from harness.processes import BASE_DIR


def _check_deploy(overrides: dict) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SECURE_", "SESSION_", "CSRF_"))}
    env.update(overrides, DJANGO_SETTINGS_MODULE="memory_platform.settings")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _documented_settings() -> dict:
    lines = (BASE_DIR / "production.env.example").read_text().splitlines()
    settings = dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))
    settings["SECRET_KEY"] = secrets.token_urlsafe(50)  # the file says: replace the placeholder
    return settings


def test_the_documented_production_settings_pass_check_deploy():
    result = _check_deploy(_documented_settings())

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_local_defaults_do_not():
    """What the production settings turn on: without them check --deploy names each one."""
    result = _check_deploy({"SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "false"})

    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr
