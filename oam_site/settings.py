"""OAM Site settings: one module, every value from the environment with a working default.

Embedded default (no service to start): a SQLite file under ``var/`` with WAL,
a busy timeout and sqlite-vec. A server database: PostgreSQL with pgvector, chosen by
``OAM_DATABASE_URL``, or Oracle Database 23ai/26ai through python-oracledb thin mode, chosen by
``OAM_ORACLE_DSN`` (see docs/databases.md and docs/configuration.md).
"""

from pathlib import Path
from urllib.parse import unquote

import environ
from django.core.exceptions import ImproperlyConfigured

from oam_site.secret_key import load_or_create

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env") if (BASE_DIR / ".env").exists() else None

DEBUG = env.bool("DJANGO_DEBUG", default=False)
VAR_DIR = Path(env.str("OAM_VAR_DIR", default=str(BASE_DIR / "var")))
# Never a public constant: without DJANGO_SECRET_KEY a random key is made on the first start and
# kept in DJANGO_SECRET_KEY_FILE (default var/secret_key, mode 0600; oam_site/secret_key.py).
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or load_or_create(
    Path(env.str("DJANGO_SECRET_KEY_FILE", default=str(VAR_DIR / "secret_key")))
)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # /api/docs renders Swagger UI from ninja's own static files (no CDN: works offline)
    "template_partials",  # {% partialdef %}: one template serves a page and its htmx fragments
    "django_dramatiq",  # before "memory": it sets the Dramatiq broker the actors bind to
    "memory",
    "threads",
    "staff",
    "axes",  # staff login throttling
    "csp",  # Content-Security-Policy on the staff pages
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "oam_site.middleware.StaticFilesMiddleware",  # WhiteNoise, async-capable
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "oam_site.middleware.PrivateApiResponsesMiddleware",
    "oam_site.middleware.ApiJsonErrorsMiddleware",
    "oam_site.middleware.HistoryActorMiddleware",  # who acts, for memory history (memory.records.history)
    "threads.audit.AuditMiddleware",  # access records: API writes and refusals, staff writes
    "axes.middleware.AxesMiddleware",  # last: it turns a locked-out login into its 429 page
]

# --- Security ---------------------------------------------------------------------
# Staff login throttling (django-axes): OAM_LOGIN_FAILURE_LIMIT failed logins for one username
# from one address lock that pair out for OAM_LOGIN_COOLOFF_MINUTES (HTTP 429); a success resets.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("OAM_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("OAM_LOGIN_COOLOFF_MINUTES", default=15.0) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Content-Security-Policy (django-csp) on the staff pages: scripts, styles, fonts and XHR/WebSocket
# from this origin only, no inline script or eval (htmx runs with allowEval off), images also as
# data: URIs. The admin and the Swagger page keep Django's and ninja's own markup, and the docs site
# (/docs/, oam_site/docs.py) MkDocs' theme, whose search runs inline scripts.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/admin/", "/api/docs", "/docs/"],
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
X_FRAME_OPTIONS = "DENY"
# JSON API rates (threads.throttling): requests a minute per API key (0: no limit; a key's own
# rate_limit_per_minute wins), and requests with a missing or wrong key a minute per client address.
# Most items one HTTP list answers (limit's maximum; a get_messages window over it is a 422).
OAM_API_MAX_PAGE = env.int("OAM_API_MAX_PAGE", default=1000)
OAM_API_RATE_LIMIT = env.int("OAM_API_RATE_LIMIT", default=1200)
OAM_API_AUTH_FAILURE_LIMIT = env.int("OAM_API_AUTH_FAILURE_LIMIT", default=30)
# Production behind HTTPS: DJANGO_SECURE=true turns on what `manage.py check --deploy` asks for
# (docs/deployment.md, "Production settings"); DJANGO_SECURE_PROXY_SSL_HEADER=true trusts X-Forwarded-Proto.
if env.bool("DJANGO_SECURE", default=False):
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    # Health probes (oam_site.health) come over plain HTTP on loopback: no redirect for them.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
    if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

ROOT_URLCONF = "oam_site.urls"

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

ASGI_APPLICATION = "oam_site.asgi.application"

# Staff pages (staff/): Django's own auth, staff accounts only.
LOGIN_URL = "staff:login"
LOGIN_REDIRECT_URL = "staff:home"

# --- Database -----------------------------------------------------------------
# One of three, chosen here: OAM_ORACLE_DSN (Oracle), else OAM_DATABASE_URL (PostgreSQL with pgvector,
# postgres://user:password@host:port/dbname, parsed by django-environ; a socket folder as the host, percent-encoded
# or as ?host=/path), else the embedded SQLite file.
OAM_ORACLE_DSN = env.str("OAM_ORACLE_DSN", default="")
OAM_DATABASE_URL = env.str("OAM_DATABASE_URL", default="")
if OAM_DATABASE_URL and not OAM_ORACLE_DSN:
    _database = environ.Env.db_url_config(OAM_DATABASE_URL)
    if _database.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"OAM_DATABASE_URL must be a postgres:// or postgresql:// URL, got scheme "
            f"{OAM_DATABASE_URL.split(':', 1)[0]!r} (SQLite is the default with no URL; Oracle is OAM_ORACLE_DSN)")
    _database.update({
        "ENGINE": "memory.backends.postgresql",
        "HOST": unquote(str(_database.get("HOST") or "")),
        "CONN_MAX_AGE": env.int("OAM_DATABASE_CONN_MAX_AGE", default=0),
        "CONN_HEALTH_CHECKS": True,
    })
    _database.setdefault("OPTIONS", {}).setdefault("connect_timeout", env.int("OAM_DATABASE_CONNECT_TIMEOUT",
                                                                              default=5))
    DATABASES = {"default": _database}
elif OAM_ORACLE_DSN:
    # Thin mode, pooled. NAME is an Easy Connect string such as
    # "localhost:1521/FREEPDB1"; HOST/PORT stay empty (Django docs, "Oracle notes": an Easy Connect string as NAME).
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.oracle",
            "NAME": OAM_ORACLE_DSN,
            "USER": env.str("OAM_ORACLE_USER"),
            "PASSWORD": env.str("OAM_ORACLE_PASSWORD"),
            "HOST": "",
            "PORT": "",
            "CONN_MAX_AGE": 0,
            "OPTIONS": {
                "pool": {
                    "min": env.int("OAM_ORACLE_POOL_MIN", default=1),
                    "max": env.int("OAM_ORACLE_POOL_MAX", default=4),
                    "increment": 1,
                }
            },
            # The test suite's schema (docs/oracle.md): Django creates user test_<USER> per run, unless
            # OAM_ORACLE_TEST_USER names one made beforehand (with CTXAPP; run pytest with --reuse-db).
            "TEST": {"USER": env.str("OAM_ORACLE_TEST_USER"), "PASSWORD": env.str("OAM_ORACLE_TEST_PASSWORD"),
                     "CREATE_USER": False, "CREATE_DB": False} if env.str("OAM_ORACLE_TEST_USER", default="") else {},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "memory.backends.sqlite_vec",
            "NAME": env.str("OAM_SQLITE_PATH", default=str(VAR_DIR / "oam.sqlite3")),
            "OPTIONS": {
                "timeout": env.float("OAM_SQLITE_BUSY_TIMEOUT", default=20.0),
                "transaction_mode": "IMMEDIATE",
                "init_command": (
                    "PRAGMA journal_mode=WAL;"
                    "PRAGMA synchronous=NORMAL;"
                    f"PRAGMA busy_timeout={int(env.float('OAM_SQLITE_BUSY_TIMEOUT', default=20.0) * 1000)};"
                ),
            },
            "TEST": {"NAME": env.str("OAM_SQLITE_TEST_PATH", default=str(VAR_DIR / "test-oam.sqlite3"))},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve the app's static files (staff CSS/JS, htmx, admin) from their sources too, so daphne started
# without `manage.py collectstatic` (`make serve` runs it) still shows a styled, scripted UI.
WHITENOISE_USE_FINDERS = True
# The documentation site that `make docs` builds from docs/ (mkdocs.yml's site_dir), served at /docs/.
OAM_DOCS_SITE_DIR = Path(env.str("OAM_DOCS_SITE_DIR", default=str(BASE_DIR / "var" / "docs")))

# Rate counters (threads.throttling) live in the cache: Redis with OAM_REDIS_URL (shared by every
# process), else each process's memory.
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache",
         "LOCATION": env.str("OAM_REDIS_URL", default=""), "KEY_PREFIX": "oam",
         # A guard, not a dependency (memory.core.degraded): a Redis that is down or hung fails a call within
         # a second, and the rate counters fall back to this process's own.
         "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}}
        if env.str("OAM_REDIS_URL", default="")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Channels -------------------------------------------------------------------
OAM_REDIS_URL = env.str("OAM_REDIS_URL", default="")
if OAM_REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default, no longer than channels-redis's
            # blocking receive (BZPOPMIN, 5 s): every idle consumer then fails with "Timeout reading"
            # (django/channels_redis#422). A longer read timeout keeps dead connections detectable.
            "CONFIG": {
                "hosts": [{"address": OAM_REDIS_URL, "socket_timeout": 30}],
                "prefix": env.str("OAM_CHANNELS_PREFIX", default="asgi"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Dramatiq (background extraction; memory.tasks, oam_site.worker) ------------------------
# Production: a Redis (redis://) or RabbitMQ (amqp://, needs `pip install dramatiq[rabbitmq]`)
# broker and `manage.py rundramatiq` workers. Empty: an in-process StubBroker with an
# embedded worker thread pool in the process that queues the work (no service to start).
OAM_DRAMATIQ_BROKER_URL = env.str("OAM_DRAMATIQ_BROKER_URL", default=OAM_REDIS_URL)
_DRAMATIQ_MIDDLEWARE = [
    "dramatiq.middleware.AgeLimit",
    "dramatiq.middleware.TimeLimit",
    "dramatiq.middleware.Callbacks",
    "dramatiq.middleware.Retries",
    "django_dramatiq.middleware.DbConnectionsMiddleware",
    "oam_site.worker.EmbeddedWorkerMiddleware",
    "oam_site.worker.ExtractionSweepMiddleware",
]


def redis_url_with_timeouts(url: str, connect: float = 2.0, read: float = 2.0) -> str:
    """``url`` with ``socket_connect_timeout`` and ``socket_timeout`` (seconds) in its query, unless it names
    them: dramatiq's RedisBroker builds its pool from the URL alone, and without them a Redis that accepts and
    never answers would hold a write's enqueue for ever (memory.core.degraded: the broker is a guard)."""
    if "socket_timeout=" in url or "socket_connect_timeout=" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}socket_connect_timeout={connect:g}&socket_timeout={read:g}"


if OAM_DRAMATIQ_BROKER_URL.startswith(("redis://", "rediss://", "unix://")):
    DRAMATIQ_BROKER = {
        "BROKER": "dramatiq.brokers.redis.RedisBroker",
        "OPTIONS": {"url": redis_url_with_timeouts(OAM_DRAMATIQ_BROKER_URL),
                    "namespace": env.str("OAM_DRAMATIQ_NAMESPACE", default="dramatiq")},
        "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE,
    }
elif OAM_DRAMATIQ_BROKER_URL.startswith(("amqp://", "amqps://")):
    DRAMATIQ_BROKER = {
        "BROKER": "dramatiq.brokers.rabbitmq.RabbitmqBroker",
        "OPTIONS": {"url": OAM_DRAMATIQ_BROKER_URL},
        "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE,
    }
else:
    DRAMATIQ_BROKER = {"BROKER": "dramatiq.brokers.stub.StubBroker", "OPTIONS": {}, "MIDDLEWARE": _DRAMATIQ_MIDDLEWARE}
OAM_EMBEDDED_WORKER = env.bool("OAM_EMBEDDED_WORKER", default=True)  # only with the in-process broker
OAM_EMBEDDED_WORKER_THREADS = env.int("OAM_EMBEDDED_WORKER_THREADS", default=2)

# --- Memory engine ----------------------------------------------------------------
# Embedder: dotted path of a class with ``dimensions`` and ``embed(texts)``.
OAM_EMBEDDER = env.str("OAM_EMBEDDER", default="memory.embedders.MiniLMEmbedder")
OAM_EMBEDDING_DIMENSIONS = env.int("OAM_EMBEDDING_DIMENSIONS", default=384)
# Texts per forward pass. sentence-transformers sorts a call's texts by length and pads each batch
# to its longest, so small batches pad less, and a CPU gains nothing from wider ones. On 2 cores,
# all-MiniLM-L6-v2, medians of 3: chosen on LoCoMo conv-26 + conv-30 (788 turns, the
# tuning half), batches of 16 embed 105.7 turns/s in one call and 101.0 in calls of 79 texts (the
# size of a micro-batched pass under 8 clients), batches of 64 95.9 and 57.0; reported on conv-44 +
# conv-47 (1,364 turns, report half): 111.6 and 93.0 against 99.1 and 57.6. 8 was no better.
OAM_EMBEDDING_BATCH_SIZE = env.int("OAM_EMBEDDING_BATCH_SIZE", default=16)
# The learned query adapter search queries' vectors are mapped by (memory.embedders.query_adapter): auto (the
# default) the embedder's own (MiniLM's: memory/adapters/minilm_query.npy), off none, else the path of an .npy
# of W - I as bench/query_adapter.py --save writes one.
OAM_QUERY_ADAPTER = env.str("OAM_QUERY_ADAPTER", default="auto")
# Concurrent requests share forward passes (memory.core.batching.MicroBatchingEmbedder), at most
# this many texts a pass (bench/ingest.py).
OAM_EMBEDDING_MICROBATCH = env.bool("OAM_EMBEDDING_MICROBATCH", default=True)
OAM_EMBEDDING_MICROBATCH_MAX_TEXTS = env.int("OAM_EMBEDDING_MICROBATCH_MAX_TEXTS", default=512)
# At most this many characters a pass (a text counts at most 2,000), taken round-robin across projects:
# what bounds how long another project's search waits behind a large batch (bench/fair_embedding.py).
OAM_EMBEDDING_PASS_CHARS = env.int("OAM_EMBEDDING_PASS_CHARS", default=4_000)
# Its worker threads, each embedding on one core (empty: the CPUs this process may use, at most 8).
OAM_EMBEDDING_WORKERS = (
    env.int("OAM_EMBEDDING_WORKERS", default=None) if env.str("OAM_EMBEDDING_WORKERS", default="") else None
)
# Cross-encoder reranking of HYBRID search's best records (memory.rerankers): how many it reads per
# search, 0 = off (the default: ~15 ms a record on 2 cores); and the reranker, a dotted path.
OAM_RERANK_DEPTH = env.int("OAM_RERANK_DEPTH", default=0)
OAM_RERANKER = env.str("OAM_RERANKER", default="memory.rerankers.CrossEncoderReranker")
# Retention (spec: MemoryRetentionConfig). Empty means "not set".
OAM_DEFAULT_TTL_DAYS = (
    env.int("OAM_DEFAULT_TTL_DAYS", default=None) if env.str("OAM_DEFAULT_TTL_DAYS", default="") else None
)
OAM_MAX_TTL_DAYS = env.int("OAM_MAX_TTL_DAYS", default=None) if env.str("OAM_MAX_TTL_DAYS", default="") else None
# get_messages() without start/end returns this many most recent messages.
OAM_MESSAGE_WINDOW = env.int("OAM_MESSAGE_WINDOW", default=100)
# Largest request body Django reads into memory (JSON, form fields). Under daphne it
# also caps every body, uploaded files included, before a byte is read
# (oam_site.request_gate). Images travel as base64 JSON, 4/3 of their size: 32 MiB
# holds one image at the default 20 MiB limit (memory.records.image_rules.ImageInputLimitConfig).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("OAM_MAX_REQUEST_BYTES", default=32 * 1024 * 1024)

# --- LLM (memory.llm.adapters) ----------------------------------------------------------------
# Any OpenAI-compatible chat-completions endpoint, base URL with its API prefix
# ("http://127.0.0.1:8012/v1"). Empty means no LLM: extraction stays off.
OAM_LLM_BASE_URL = env.str("OAM_LLM_BASE_URL", default="")
# Once an endpoint is set it needs a model name (llama.cpp's server accepts any).
OAM_LLM_MODEL = env.str("OAM_LLM_MODEL") if OAM_LLM_BASE_URL else env.str("OAM_LLM_MODEL", default="")
OAM_LLM_API_KEY = env.str("OAM_LLM_API_KEY", default="")
OAM_LLM_TIMEOUT = env.float("OAM_LLM_TIMEOUT", default=60.0)  # seconds per request
OAM_LLM_MAX_RETRIES = env.int("OAM_LLM_MAX_RETRIES", default=2)  # extra requests after invalid JSON

# --- Extraction (memory.extraction) -------------------------------------------------------
# Cosine distances between a new memory and a stored one: below DUPLICATE it is the same
# memory (not stored again); below RELATED an LLM call decides restates/updates/contradicts.
OAM_EXTRACTION_DUPLICATE_DISTANCE = env.float("OAM_EXTRACTION_DUPLICATE_DISTANCE", default=0.08)
OAM_EXTRACTION_RELATED_DISTANCE = env.float("OAM_EXTRACTION_RELATED_DISTANCE", default=0.25)
OAM_EXTRACTION_QUEUE_CAPACITY = env.int("OAM_EXTRACTION_QUEUE_CAPACITY", default=1000)  # queued jobs
OAM_EXTRACTION_MAX_ATTEMPTS = env.int("OAM_EXTRACTION_MAX_ATTEMPTS", default=4)  # claims per job
OAM_EXTRACTION_TIME_LIMIT = env.int("OAM_EXTRACTION_TIME_LIMIT", default=1200)  # seconds per job
OAM_EXTRACTION_STALE_SECONDS = env.int("OAM_EXTRACTION_STALE_SECONDS", default=1500)  # running: worker lost
OAM_EXTRACTION_RESEND_SECONDS = env.int("OAM_EXTRACTION_RESEND_SECONDS", default=300)  # queued: message lost
OAM_EXTRACTION_SWEEP_SECONDS = env.int("OAM_EXTRACTION_SWEEP_SECONDS", default=60)  # 0: at worker boot only
# An unreachable LLM: retried with a doubling backoff (first, longest wait) for the horizon, in seconds.
OAM_EXTRACTION_RETRY_HORIZON_SECONDS = env.float("OAM_EXTRACTION_RETRY_HORIZON_SECONDS", default=21600)
OAM_EXTRACTION_RETRY_BACKOFF_SECONDS = env.float("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS", default=2)
OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS = env.float("OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS", default=300)
# The API's operations are async views; true serves the same operations as sync views, each request's
# operation in one worker thread (oam_site.api.api_urls), so bench/api_load.py can compare the two.
OAM_API_SYNC = env.bool("OAM_API_SYNC", default=False)
# Access records of API reads too (writes, refusals and staff writes are always recorded; threads.audit).
OAM_AUDIT_READS = env.bool("OAM_AUDIT_READS", default=False)
# An API key's open WebSockets re-check the key this often (seconds) and close (4401) once it is revoked
# or expired; revoking through the API closes them at once.
OAM_WS_KEY_RECHECK_SECONDS = env.float("OAM_WS_KEY_RECHECK_SECONDS", default=30.0)
# Access records older than this many days are deleted by the periodic purge (0: kept forever).
OAM_ACCESS_LOG_DAYS = env.int("OAM_ACCESS_LOG_DAYS", default=90)
# Expired records are deleted (not only hidden) at worker boot and then at most this often (memory.services.erasure).
OAM_PURGE_EXPIRED_SECONDS = env.int("OAM_PURGE_EXPIRED_SECONDS", default=3600)  # 0: never
# Context cards served are kept this many days after last served, for replay with as_of (issue #32,
# memory.services.cards); the periodic purge deletes older ones. 0: no card log and no replay.
OAM_CONTEXT_CARD_LOG_DAYS = env.int("OAM_CONTEXT_CARD_LOG_DAYS", default=90)
# And at most this many per thread, holding at most this many characters (text and parts), the newest kept: a key
# that reads cards with ever new parameters cannot grow the log without bound (an outside attack: 50 MB from 20 reads).
OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD = env.int("OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD", default=500)
OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD = env.int("OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD", default=5_000_000)
# What deleting or expiring a message does to the memories derived only from it: invalidate or delete.
OAM_DERIVED_MEMORY_POLICY = env.str("OAM_DERIVED_MEMORY_POLICY", default="invalidate")
# What superseding, invalidating, editing or deleting a memory does to the memories derived from it (issue #32):
# flag them for review, or invalidate them too (memory.links.dependants).
OAM_DEPENDANTS_POLICY = env.str("OAM_DEPENDANTS_POLICY", default="flag")
# Stored memories an extraction prompt shows so that a new memory can name those it was inferred from (0: none).
OAM_EXTRACTION_KNOWN_MEMORIES = env.int("OAM_EXTRACTION_KNOWN_MEMORIES", default=0)
# SQLite: a storage scrub (erasure, expiry purge) VACUUMs the file when it is at most this many MB (0: never).
OAM_SCRUB_VACUUM_MAX_MB = env.float("OAM_SCRUB_VACUUM_MAX_MB", default=512)
OAM_EXTRACTION_INLINE_WAIT = env.int("OAM_EXTRACTION_INLINE_WAIT", default=300)  # INLINE waits for earlier jobs
# OpenTelemetry (memory.core.telemetry): spans are on when the standard OTEL_* variables ask for them
# (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT; docs/configuration.md, "Tracing"). With this on, each
# record a search returns gets a span event with its rank, score, distance and per-arm scores ("why was this recalled").
OAM_OTEL_SEARCH_SCORES = env.bool("OAM_OTEL_SEARCH_SCORES", default=False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="WARNING")},
}
# Ranking: VECTOR, KEYWORD or HYBRID (vector + BM25 fused; memory.search).
OAM_SEARCH_MODE = env.str("OAM_SEARCH_MODE", default="HYBRID").upper()
# Vector arm on SQLite: exact KNN over a process-local numpy copy of the chunk
# embeddings (memory.index.vector_cache; ~1.5 KB per chunk per process). Above the
# row cap, or with the cache off, chunks are ranked in SQL. Oracle uses its
# vector index instead: FETCH APPROX ... WITH TARGET ACCURACY (memory.search).
OAM_VECTOR_CACHE = env.bool("OAM_VECTOR_CACHE", default=True)
OAM_VECTOR_CACHE_MAX_ROWS = env.int("OAM_VECTOR_CACHE_MAX_ROWS", default=1_000_000)
OAM_VECTOR_TARGET_ACCURACY = env.int("OAM_VECTOR_TARGET_ACCURACY", default=95)
