"""Settings fail fast: the settings check (memory_platform.checks), the typed environment reader,
and the processes that refuse to start (memory_platform.startup: web, worker, beat)."""

import os
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings as django_settings
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from harness.processes import celery_command, database_url, free_port, gunicorn_command
from memory_platform.checks import SETTING_RULES
from memory_platform.settings import Env

BASE_DIR = Path(__file__).resolve().parent.parent


def platform_errors() -> list[str]:
    return [message.msg for message in run_checks() if message.id.startswith("platform.")]


def test_the_defaults_pass_and_every_rule_names_a_real_setting():
    assert platform_errors() == []
    assert [name for name in SETTING_RULES if not hasattr(django_settings, name)] == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SKILL_REVIEW_MODE", "Manual", "SKILL_REVIEW_MODE='Manual' is not valid; use one of auto, manual."),
        ("LLM_PROVIDER", "anthropic", "LLM_PROVIDER='anthropic' is not valid; use one of rules, openai."),
        ("EMBEDDING_PROVIDER", "bert", "EMBEDDING_PROVIDER='bert' is not valid; use one of e5, openai, local, hash."),
        ("DEFAULT_SESSION_TAG", "chat", "DEFAULT_SESSION_TAG='chat' is not valid; use one of task, conversation."),
        ("RERANKER", "Context", "RERANKER='Context' is not valid; use one of none, context, cross-encoder, llm."),
        ("RERANK_CANDIDATES", 0, "RERANK_CANDIDATES=0 is not valid; use a number from 1 to 1000."),
        ("QUERY_DECOMPOSE_MAX", 11, "QUERY_DECOMPOSE_MAX=11 is not valid; use a number from 1 to 10."),
        (
            "EVOLUTION_MIN_EDIT_SIMILARITY",
            float("nan"),
            "EVOLUTION_MIN_EDIT_SIMILARITY=nan is not valid; use a number from 0 to 1.",
        ),
        ("LLM_TIMEOUT_SECONDS", 0.0, "LLM_TIMEOUT_SECONDS=0.0 is not valid; use a number above 0."),
        ("BROKER_SOCKET_TIMEOUT_SECONDS", 1.0, "BROKER_SOCKET_TIMEOUT_SECONDS=1.0 is not valid; use a number above 1."),
        ("TASK_MAX_ATTEMPTS", -1, "TASK_MAX_ATTEMPTS=-1 is not valid; use a number at least 1."),
        (
            "TOPIC_CLUSTER_EPS",
            3.0,
            "TOPIC_CLUSTER_EPS=3.0 is not valid; use a number from 0 to 2, or leave it unset.",
        ),
        (
            "TOPIC_CLUSTER_EPS_PERCENTILE",
            100,
            "TOPIC_CLUSTER_EPS_PERCENTILE=100 is not valid; use a number from 1 to 99.",
        ),
        ("LOG_LEVEL", "verbose", "LOG_LEVEL='verbose' is not valid; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL."),
    ],
)
def test_a_bad_choice_or_range_names_the_setting_the_value_and_what_is_valid(settings, name, value, message):
    setattr(settings, name, value)
    assert platform_errors() == [message]


def test_a_soft_time_limit_must_be_below_the_hard_one(settings):
    settings.CELERY_TASK_SOFT_TIME_LIMIT, settings.CELERY_TASK_TIME_LIMIT = 400, 360
    assert platform_errors() == [
        "CELERY_TASK_SOFT_TIME_LIMIT=400 must be below CELERY_TASK_TIME_LIMIT=360, or the soft limit never fires."
    ]


@pytest.mark.parametrize(
    ("read", "raw", "message"),
    [
        ("int", "1.5", "SETTING_UNDER_TEST='1.5' is not valid; use a whole number."),
        ("float", "fast", "SETTING_UNDER_TEST='fast' is not valid; use a number."),
        ("bool", "maybe", "SETTING_UNDER_TEST='maybe' is not valid; use true or false."),
    ],
)
def test_the_environment_reader_names_a_value_that_does_not_parse(monkeypatch, read, raw, message):
    monkeypatch.setenv("SETTING_UNDER_TEST", raw)
    with pytest.raises(ImproperlyConfigured) as refused:
        getattr(Env(), read)("SETTING_UNDER_TEST", default=1)
    assert str(refused.value) == message


@pytest.mark.parametrize(("raw", "value"), [("off", False), ("No", False), ("", False), ("yes", True), ("1", True)])
def test_boolean_words_still_read_as_before(monkeypatch, raw, value):
    monkeypatch.setenv("SETTING_UNDER_TEST", raw)
    assert Env().bool("SETTING_UNDER_TEST", default=True) is value


# Processes --------------------------------------------------------------------------------------


def _run(command: list[str], *, env: dict, timeout: float = 90) -> subprocess.CompletedProcess:
    environment = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="memory_platform.settings",
        PYTHONPATH=str(BASE_DIR),
        EMBEDDED_POSTGRES_ATTACH="1",
        **env,
    )
    return subprocess.run(command, cwd=BASE_DIR, env=environment, capture_output=True, text=True, timeout=timeout)


CELERY = {
    "worker": celery_command("worker", "--pool=solo", "--without-mingle", "--without-gossip", "--loglevel=INFO"),
    "beat": celery_command("beat", "--loglevel=INFO"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("process", ["worker", "beat"])
def test_worker_and_beat_refuse_to_start_on_a_bad_setting(process):
    result = _run(
        CELERY[process],
        env={
            "DATABASE_URL": database_url(connection.settings_dict),
            "SKILL_REVIEW_MODE": "Manual",
        },
    )
    assert result.returncode != 0
    assert "platform.E001: SKILL_REVIEW_MODE='Manual' is not valid; use one of auto, manual." in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def unmigrated_database_url():
    """An empty database on the test server: every migration is unapplied there."""
    params = {
        key: value
        for key, value in connection.get_connection_params().items()
        if key in ("host", "port", "user", "password")
    }
    name = f"unmigrated_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url({**connection.settings_dict, "NAME": name})
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.mark.django_db
@pytest.mark.parametrize("process", ["worker", "beat"])
def test_worker_and_beat_refuse_to_start_on_unapplied_migrations(process, unmigrated_database_url):
    result = _run(CELERY[process], env={"DATABASE_URL": unmigrated_database_url})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "migrate" in line]
    assert len(lines) == 1 and "unapplied migrations): run `python manage.py migrate` first." in lines[0], result.stderr


@pytest.mark.django_db
def test_the_web_server_refuses_to_start_on_a_bad_setting():
    result = _run(
        gunicorn_command(free_port(), "--workers", "1"),
        env={
            "DATABASE_URL": database_url(connection.settings_dict),
            "EMBEDDING_PROVIDER": "bert",
        },
    )
    assert result.returncode != 0  # gunicorn stops when a worker cannot boot, instead of retrying it
    assert "platform.E001: EMBEDDING_PROVIDER='bert' is not valid" in result.stderr
