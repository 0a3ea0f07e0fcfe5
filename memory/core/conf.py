"""Settings of the memory engine with their defaults and rules: the one place the engine reads ``OAM_*``.

``SETTINGS`` lists every ``OAM_*`` setting the engine (and its worker wiring
in ``oam_site.worker``) reads, with its default, its type and its bounds.
``get(name)`` reads one when called (tests override settings at run time), so
modules call ``conf.get("OAM_EXTRACTION_QUEUE_CAPACITY")`` or an accessor
below instead of repeating ``getattr(settings, ..., default)``.
``oam_site/settings.py`` sets them from the environment (django-environ).

``problems()`` checks the configured values against the rules;
``memory.checks`` reports each problem by setting name through Django's
system checks (``manage.py check``, and every ``runserver``/``migrate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

#: Rankings ``OAM_SEARCH_MODE`` may name (``memory.search``).
SEARCH_MODES = ("VECTOR", "KEYWORD", "HYBRID")


@dataclass(frozen=True)
class Setting:
    """One setting: ``default`` when the settings module leaves it out; ``kind`` one of int, float, bool, str;
    ``low``/``high`` inclusive bounds of a number; ``optional``: None is allowed; ``choices``: allowed strings."""

    name: str
    default: Any
    kind: type
    low: float | None = None
    high: float | None = None
    optional: bool = False
    choices: tuple[str, ...] = ()
    help: str = ""


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("OAM_EMBEDDER", "memory.embedders.MiniLMEmbedder", str, help="dotted path of the embedder class"),
    Setting("OAM_EMBEDDING_DIMENSIONS", 384, int, 1, 65535, help="VECTOR column width (Oracle allows 65535)"),
    Setting("OAM_EMBEDDING_BATCH_SIZE", 16, int, 1),
    Setting("OAM_QUERY_ADAPTER", "auto", str,
            help="auto: the embedder's own query adapter; off: none; else the path of an .npy of W - I "
                 "(memory.embedders.query_adapter)"),
    Setting("OAM_EMBEDDING_MICROBATCH", True, bool),
    Setting("OAM_EMBEDDING_MICROBATCH_MAX_TEXTS", 512, int, 1),
    Setting("OAM_EMBEDDING_WORKERS", None, int, 1, 256, optional=True,
            help="embedding worker threads (default: the CPUs the process may use, at most 8)"),
    Setting("OAM_RERANK_DEPTH", 0, int, 0, 100,
            help="HYBRID results the cross-encoder reads per search, ~15 ms each on 2 cores; "
                 "0: off (memory.rerankers)"),
    Setting("OAM_RERANKER", "memory.rerankers.CrossEncoderReranker", str, help="dotted path of the reranker class"),
    Setting("OAM_DEFAULT_TTL_DAYS", None, int, 1, optional=True),
    Setting("OAM_MAX_TTL_DAYS", None, int, 1, optional=True),
    Setting("OAM_MESSAGE_WINDOW", 100, int, 1),
    Setting("OAM_API_MAX_PAGE", 1000, int, 1, 2**31 - 1, help="most items one HTTP list answers"),
    Setting("OAM_LLM_BASE_URL", "", str),
    Setting("OAM_LLM_MODEL", "", str),
    Setting("OAM_LLM_API_KEY", "", str),
    Setting("OAM_LLM_TIMEOUT", 60.0, float, 0.001, help="seconds per LLM request"),
    Setting("OAM_LLM_MAX_RETRIES", 2, int, 0),
    Setting("OAM_EXTRACTION_DUPLICATE_DISTANCE", 0.08, float, 0.0, 2.0, help="cosine distance"),
    Setting("OAM_EXTRACTION_RELATED_DISTANCE", 0.25, float, 0.0, 2.0, help="cosine distance"),
    Setting("OAM_EXTRACTION_QUEUE_CAPACITY", 1000, int, 1, help="queued extraction jobs"),
    Setting("OAM_EXTRACTION_MAX_ATTEMPTS", 4, int, 1, help="claims of one job"),
    Setting("OAM_EXTRACTION_TIME_LIMIT", 1200, int, 1, help="seconds one job may run"),
    Setting("OAM_EXTRACTION_STALE_SECONDS", 1500, float, 1),
    Setting("OAM_EXTRACTION_RESEND_SECONDS", 300, float, 0),
    Setting("OAM_EXTRACTION_SWEEP_SECONDS", 60, float, help="0 or less: the sweep runs at worker boot only"),
    Setting("OAM_EXTRACTION_INLINE_WAIT", 300, float, 0),
    Setting("OAM_EXTRACTION_RETRY_HORIZON_SECONDS", 21600, float, 0,
            help="seconds a job whose LLM is unreachable keeps retrying, from its first such failure; "
                 "0: it fails at the first"),
    Setting("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS", 2, float, 0.01, help="first wait before such a retry"),
    Setting("OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS", 300, float, 0.01,
            help="longest wait between such retries (the wait doubles up to it)"),
    Setting("OAM_PURGE_EXPIRED_SECONDS", 3600, float, help="0 or less: never"),
    Setting("OAM_CONTEXT_CARD_LOG_DAYS", 90, int, 0,
            help="days a served context card is kept for replay (issue #32); 0: no log, no replay"),
    Setting("OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD", 500, int, 1,
            help="logged context cards kept per thread, the newest (issue #32): one read key cannot grow the log"),
    Setting("OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD", 5_000_000, int, 1,
            help="characters of logged cards (text and parts) kept per thread, the newest first; the newest "
                 "card is kept whatever its size"),
    Setting("OAM_DERIVED_MEMORY_POLICY", "invalidate", str, choices=("invalidate", "delete"),
            help="what a deleted or expired message does to the memories derived only from it "
                 "(memory.records.provenance)"),
    Setting("OAM_DEPENDANTS_POLICY", "flag", str, choices=("flag", "invalidate"),
            help="what a superseded, invalidated, edited or deleted memory does to the memories derived from it: "
                 "flag them for review, or also invalidate them (memory.links.dependants, issue #32)"),
    Setting("OAM_EXTRACTION_KNOWN_MEMORIES", 0, int, 0, 50,
            help="stored memories of the thread's user and agent an extraction prompt shows, so that a new "
                 "memory can name those it was inferred from (derived_from, issue #32); 0: none"),
    Setting("OAM_SCRUB_VACUUM_MAX_MB", 512, float, 0,
            help="SQLite: VACUUM after a storage scrub when the file is at most this many MB; 0: never"),
    Setting("OAM_EMBEDDED_WORKER", True, bool),
    Setting("OAM_EMBEDDED_WORKER_THREADS", 2, int, 1),
    Setting("OAM_SEARCH_MODE", "HYBRID", str, choices=SEARCH_MODES),
    Setting("OAM_VECTOR_CACHE", True, bool),
    Setting("OAM_VECTOR_CACHE_MAX_ROWS", 1_000_000, int, 0),
    Setting("OAM_VECTOR_TARGET_ACCURACY", 95, int, 1, 100, help="percent (Oracle's TARGET ACCURACY)"),
    Setting("OAM_OTEL_SEARCH_SCORES", False, bool,
            help="each record a search returns gets a span event with its rank, score, distance and per-arm "
                 "scores (memory.core.telemetry; spans only when an OpenTelemetry SDK is configured)"),
)}

#: Each setting's default, by name.
DEFAULTS: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}


def get(name: str) -> Any:
    """The configured value of ``name``, or its default (KeyError for a setting not in ``SETTINGS``)."""
    return getattr(settings, name, SETTINGS[name].default)


def problems() -> list[tuple[str, str]]:
    """``(setting name, what is wrong)`` for each configured value that breaks its rule; empty when all hold."""
    found = []
    for name, rule in SETTINGS.items():
        value = get(name)
        if value is None:
            if not rule.optional:
                found.append((name, "must be set (None is not allowed)"))
            continue
        if rule.kind is bool:
            ok = isinstance(value, bool)
        elif rule.kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif rule.kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, rule.kind)
        if not ok:
            found.append((name, f"must be {'an' if rule.kind is int else 'a'} {rule.kind.__name__}"
                                f"{' or None' if rule.optional else ''}, not {type(value).__name__} {value!r}"))
            continue
        if rule.low is not None and value < rule.low:
            found.append((name, f"must be at least {rule.low:g}, not {value!r}"))
        elif rule.high is not None and value > rule.high:
            found.append((name, f"must be at most {rule.high:g}, not {value!r}"))
        elif rule.choices and value not in rule.choices:
            found.append((name, f"must be one of {', '.join(rule.choices)}, not {value!r}"))
    if not {name for name, _ in found} & set(_BACKOFF):
        first, cap = (get(name) for name in _BACKOFF)
        if first > cap:
            found.append((_BACKOFF[0], f"must be at most OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS ({cap:g}), "
                                       f"not {first!r}"))
    return found


#: The first and the longest wait between retries of a job whose LLM is unreachable (``problems`` checks first <= cap).
_BACKOFF = ("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS", "OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS")


# --- accessors of the values modules read most ------------------------------------------------


def extraction_max_attempts() -> int:
    """Claims of one extraction job before it fails for good (``OAM_EXTRACTION_MAX_ATTEMPTS``, 4)."""
    return int(get("OAM_EXTRACTION_MAX_ATTEMPTS"))


def extraction_time_limit() -> int:
    """Seconds one extraction job may run in a worker (``OAM_EXTRACTION_TIME_LIMIT``, 1200)."""
    return int(get("OAM_EXTRACTION_TIME_LIMIT"))


def rerank_depth() -> int:
    """HYBRID results the optional cross-encoder reads per search (``OAM_RERANK_DEPTH``, 0 = off), held to the
    setting's bounds (0-100) even when a bad value got past ``memory.E001``: the work per search stays bounded."""
    rule = SETTINGS["OAM_RERANK_DEPTH"]
    value = get("OAM_RERANK_DEPTH")
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return int(min(max(value, rule.low), rule.high))
