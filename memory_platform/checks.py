"""Settings that fail fast: every choice or range setting is checked at start (`manage.py check`,
web, MCP, worker and beat), and an error names the setting, the bad value and what is valid.

A new choice or number setting adds one line to SETTING_RULES; a rule that spans several settings
or needs a file on disk stays a check of its own beside the code it guards (apps/search/checks.py).
"""

import math
from dataclasses import dataclass

from django.conf import settings
from django.core.checks import Error, register

from apps.core.models import SessionTag
from apps.core.redis_clients import is_sentinel_url, sentinel_addresses
from apps.providers.embeddings import EMBEDDING_PROVIDERS
from apps.providers.llm import LLM_PROVIDERS, STRUCTURED_OUTPUT_MODES
from apps.search.decompose import DECOMPOSERS
from apps.search.engine import TIME_WINDOW_MODES
from apps.search.rerank import RERANKERS
from apps.skills.services.skills import REVIEW_MODES


@dataclass(frozen=True)
class OneOf:
    choices: tuple

    def allows(self, value) -> bool:
        return value in self.choices

    def __str__(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))


@dataclass(frozen=True)
class Between:
    """A number from `minimum` to `maximum` (inclusive; None leaves that side open); `above`
    excludes the minimum itself (a timeout of 0 seconds is no timeout)."""

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False

    def allows(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return False
        if self.minimum is not None and (value <= self.minimum if self.above else value < self.minimum):
            return False
        return self.maximum is None or value <= self.maximum

    def __str__(self) -> str:
        if self.minimum is not None and self.maximum is not None and not self.above:
            return f"a number from {self.minimum:g} to {self.maximum:g}"
        low = None if self.minimum is None else f"{'above' if self.above else 'at least'} {self.minimum:g}"
        high = None if self.maximum is None else f"at most {self.maximum:g}"
        return "a number " + " and ".join(part for part in (low, high) if part)


@dataclass(frozen=True)
class UnsetOr:
    """Unset (None: the code decides) or what `rule` allows."""

    rule: Between

    def allows(self, value) -> bool:
        return value is None or self.rule.allows(value)

    def __str__(self) -> str:
        return f"{self.rule}, or leave it unset"


def at_least(minimum: float) -> Between:
    return Between(minimum=minimum)


POSITIVE = Between(minimum=0, above=True)

# setting → what it accepts. Booleans and integers that do not parse are refused earlier, while the
# settings load (memory_platform.settings.Env names the variable).
SETTING_RULES = {
    # Server and database
    "CONN_MAX_AGE": at_least(0),
    "API_KEY_CACHE_SECONDS": at_least(0),
    "DATABASE_CONNECT_TIMEOUT_SECONDS": at_least(1),
    "REPLICA_MAX_LAG_SECONDS": POSITIVE,
    "REPLICA_CHECK_SECONDS": POSITIVE,
    "REPLICA_RETRY_SECONDS": POSITIVE,
    "DATA_UPLOAD_MAX_MEMORY_SIZE": at_least(1024),
    "JSON_MAX_DEPTH": Between(2, 500),
    "LOG_LEVEL": OneOf(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    "MCP_THREADS": at_least(1),
    "OAUTH_ACCESS_TOKEN_SECONDS": at_least(60),
    "OAUTH_REFRESH_TOKEN_SECONDS": at_least(60),
    "OAUTH_REGISTRATION_TOKEN_SECONDS": at_least(60),
    "OAUTH_REGISTRATION_MAX_REDIRECT_URIS": at_least(1),
    "OAUTH_REGISTRATIONS_PER_MINUTE": at_least(0),
    "API_REQUESTS_PER_MINUTE": at_least(0),
    "ORGANIZATION_REQUESTS_PER_MINUTE": at_least(0),
    "CREDENTIAL_REQUESTS_PER_MINUTE": at_least(0),
    # Models
    "LLM_PROVIDER": OneOf(LLM_PROVIDERS),
    "LLM_TIMEOUT_SECONDS": POSITIVE,
    "LLM_MAX_RETRIES": at_least(0),
    "LLM_STRUCTURED_OUTPUT": OneOf(STRUCTURED_OUTPUT_MODES),
    "LLM_MAX_PROMPT_TOKENS": at_least(2000),
    "EMBEDDING_PROVIDER": OneOf(EMBEDDING_PROVIDERS),
    # Ingest and sessions
    "DEFAULT_SESSION_TAG": OneOf(tuple(SessionTag.values)),
    "MESSAGE_MAX_CHARS": at_least(100),
    "MAX_MESSAGES_PER_ADD": at_least(1),
    "SESSION_IDLE_SECONDS": at_least(1),
    "EXTRACTION_DEBOUNCE_SECONDS": at_least(0),
    "IDEMPOTENCY_KEY_TTL_HOURS": at_least(1),
    # Skills
    "SKILL_REVIEW_MODE": OneOf(REVIEW_MODES),
    "SKILL_SHARE_MIN_USERS": at_least(1),
    "SKILL_EFFECTIVENESS_WEIGHT": Between(0, 0.9),
    "SKILL_EFFECTIVENESS_PRIOR_SESSIONS": at_least(0),
    "SKILL_REVIEW_MIN_USERS": at_least(1),
    "SKILL_EVIDENCE_TOP_RANKS": Between(1, 50),
    "DISTILLER_MAX_TRANSCRIPT_CHARS": at_least(1000),
    "DISTILLER_MAX_MESSAGE_CHARS": at_least(100),
    "EVIDENCE_MAX_CHARS": at_least(1),
    "EVOLUTION_MAX_EXPERIENCES": at_least(1),
    "EVOLUTION_MAX_EDITS": at_least(1),
    "EVOLUTION_MIN_EDIT_SIMILARITY": Between(0, 1),
    "EVOLUTION_DEBOUNCE_SECONDS": at_least(0),
    "EVOLUTION_TITLE_SIMILARITY": Between(0, 1),
    # Memories and profiles
    "EXTRACTION_MAX_TURNS": at_least(1),
    "EXTRACTION_CANDIDATES_PER_TURN": at_least(0),
    "EXTRACTION_MAX_CANDIDATES": at_least(0),
    "DELETED_MEMORY_RETENTION_DAYS": at_least(0),
    "PROFILE_COMPILE_DEBOUNCE_SECONDS": at_least(0),
    "PROFILE_COMPILE_AFTER_MENTIONS": at_least(1),
    "PROFILE_MAX_EVIDENCE": at_least(1),
    "TOPIC_CLUSTER_EPS": UnsetOr(Between(0, 2)),
    "TOPIC_CLUSTER_EPS_PERCENTILE": Between(1, 99),
    "TOPIC_CLUSTER_MIN_ITEMS": at_least(2),
    "TOPIC_MAX_ITEMS": Between(10, 20000),
    "TOPIC_MAX_EVIDENCE": at_least(1),
    "TOPIC_COMPILE_AFTER_ITEMS": at_least(1),
    "TOPIC_COMPILE_AFTER_DAYS": at_least(0),
    "TOPIC_COMPILE_MIN_ITEMS": at_least(1),
    # Search
    "SEARCH_SCAN_MAX_ROWS": at_least(0),
    "SEARCH_PROFILE_HITS": at_least(0),
    "CONSOLIDATE_MIN_COSINE": Between(-1, 1),
    "CONSOLIDATE_MIN_TEXT_SIMILARITY": Between(0, 1),
    "SEARCH_TOPIC_HITS": at_least(0),
    "RERANKER": OneOf(RERANKERS),
    "RERANK_CANDIDATES": Between(1, 1000),
    "RERANK_LLM_TIMEOUT_SECONDS": POSITIVE,
    "QUERY_DECOMPOSER": OneOf(DECOMPOSERS),
    "QUERY_DECOMPOSE_MAX": Between(1, 10),
    "QUERY_DECOMPOSE_TIMEOUT_SECONDS": POSITIVE,
    "SEARCH_TIME_WINDOW": OneOf(TIME_WINDOW_MODES),
    # Privacy
    "CONVERSATION_RETENTION_DAYS": at_least(0),
    "ERASURE_BATCH_SIZE": at_least(1),
    "ERASURE_REPLICA_WAIT_SECONDS": at_least(0),
    "DELETE_WAIT_SECONDS": Between(0, 300),
    # Export and import
    "EXPORT_TTL_SECONDS": at_least(1),
    "PORTABILITY_BATCH_SIZE": at_least(1),
    "IMPORT_MAX_BYTES": at_least(1),
    "IMPORT_MAX_FILE_BYTES": at_least(1),
    "IMPORT_MAX_COMPRESSION_RATIO": at_least(1),
    # Webhooks
    "WEBHOOK_TIMEOUT_SECONDS": Between(0, 60, above=True),
    "WEBHOOK_MAX_ATTEMPTS": Between(1, 100),
    "WEBHOOK_RETRY_BASE_SECONDS": POSITIVE,
    "WEBHOOK_RETRY_MAX_SECONDS": POSITIVE,
    "WEBHOOK_DISABLE_AFTER_FAILURES": at_least(1),
    "WEBHOOK_DELIVERY_RETENTION_DAYS": at_least(1),
    # Pipeline and broker
    "TASK_MAX_ATTEMPTS": at_least(1),
    "TASK_RETRY_BASE_SECONDS": POSITIVE,
    "TASK_RETRY_MAX_SECONDS": POSITIVE,
    "TASK_HEARTBEAT_SECONDS": POSITIVE,
    "TASK_STALE_AFTER_SECONDS": POSITIVE,
    "TASK_REPUBLISH_AFTER_SECONDS": POSITIVE,
    "TASK_RETENTION_DAYS": at_least(0),
    "TASK_DRAIN_SECONDS": POSITIVE,
    "EMBEDDING_THREADS": Between(1, 256),
    "TASK_CLAIM_BATCH": Between(1, 1000),
    "TASK_COMPILE_MAX_RUNNING": at_least(0),
    "TASK_NOT_YET_SECONDS": POSITIVE,
    "PROCESS_STALE_AFTER_SECONDS": POSITIVE,
    "CELERY_TASK_SOFT_TIME_LIMIT": at_least(1),
    "CELERY_TASK_TIME_LIMIT": at_least(1),
    "CELERY_DB_REUSE_MAX": at_least(0),
    # Above kombu's 1 s BRPOP wait, or idle workers time out while they wait for work.
    "BROKER_SOCKET_TIMEOUT_SECONDS": Between(minimum=1, above=True),
    "BROKER_CONNECT_TIMEOUT_SECONDS": POSITIVE,
    "BROKER_PUBLISH_TIMEOUT_SECONDS": POSITIVE,
}


def setting_problems(rules: dict = SETTING_RULES) -> list[str]:
    """One sentence per setting whose value its rule refuses (a setting that is absent is not checked)."""
    problems = []
    for name, rule in rules.items():
        if not hasattr(settings, name):
            continue
        value = getattr(settings, name)
        if not rule.allows(value):
            problems.append(f"{name}={value!r} is not valid; use {rule}.")
    return problems


@register()
def settings_check(app_configs, **kwargs):
    errors = [Error(problem, id="platform.E001") for problem in setting_problems()]
    if settings.CELERY_TASK_SOFT_TIME_LIMIT >= settings.CELERY_TASK_TIME_LIMIT:
        errors.append(
            Error(
                f"CELERY_TASK_SOFT_TIME_LIMIT={settings.CELERY_TASK_SOFT_TIME_LIMIT} must be below "
                f"CELERY_TASK_TIME_LIMIT={settings.CELERY_TASK_TIME_LIMIT}, or the soft limit never fires.",
                id="platform.E002",
            )
        )
    errors.extend(Error(problem, id="platform.E003") for problem in sentinel_problems())
    return errors


REDIS_URL_SETTINGS = ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "RATE_LIMIT_REDIS_URL")


def sentinel_problems() -> list[str]:
    """A Redis URL naming Sentinels needs the name of the primary they watch, and well-formed addresses."""
    problems = []
    for name in REDIS_URL_SETTINGS:
        url = getattr(settings, name, "")
        if not is_sentinel_url(url):
            continue
        if not settings.REDIS_SENTINEL_MASTER:
            problems.append(
                f"{name} names Redis Sentinels; set REDIS_SENTINEL_MASTER to the name of the primary they watch."
            )
        try:
            sentinel_addresses(url)
        except ValueError as exc:
            problems.append(f"{name}: {exc}; use sentinel://host:26379/0;sentinel://host2:26379/0.")
    return problems
