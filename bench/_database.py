"""What the benchmarks share: pointing Django at a benchmark's own SQLite file or PostgreSQL database, and a
nearest-rank percentile.

Imported as ``bench._database`` (each script puts the repository root on ``sys.path`` first), so it works
whether a script runs as ``python bench/<name>.py`` or is imported as ``bench.<name>`` (tests, bench/locomo_qa.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from memory.dev.postgres_server import recreate_database


def use_sqlite(path: Path, *, fresh: bool = True, **env: str) -> None:
    """Point Django at the SQLite file ``path``; must run before ``django.setup()``.

    ``fresh``: remove the file and its ``-wal``/``-shm``/``-journal`` companions first (a new, empty
    database); otherwise it must exist (SystemExit naming it). Sets ``OAM_SQLITE_PATH``, clears
    ``OAM_ORACLE_DSN`` and ``OAM_DATABASE_URL`` (SQLite even when the shell or .env names an Oracle or a
    PostgreSQL database: settings prefer either to the SQLite file), sets each of ``env``
    (e.g. ``OAM_LLM_BASE_URL=""``: no LLM) and defaults ``DJANGO_SETTINGS_MODULE``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if fresh:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    elif not path.is_file():
        raise SystemExit(f"--reuse: {path} does not exist; run once without --reuse")
    os.environ["OAM_SQLITE_PATH"] = str(path)
    os.environ["OAM_ORACLE_DSN"] = ""
    os.environ["OAM_DATABASE_URL"] = ""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")


def use_postgres(url: str, *, fresh: bool = True, **env: str) -> None:
    """Point Django at the PostgreSQL database of ``url`` (``postgres://...``); must run before ``django.setup()``.

    ``fresh``: drop and create that database first (through the server's ``postgres`` database, with
    ``DROP DATABASE ... WITH (FORCE)``), so a benchmark starts empty; the role must be allowed to. Use it on a
    server of the benchmark's own (``memory.dev.postgres_server.embedded_postgres``), never a shared one. Sets
    ``OAM_DATABASE_URL``, clears ``OAM_ORACLE_DSN``, sets each of ``env`` and defaults ``DJANGO_SETTINGS_MODULE``.
    """
    if fresh:
        recreate_database(url)
    os.environ["OAM_DATABASE_URL"] = url
    os.environ["OAM_ORACLE_DSN"] = ""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")


def message_search_request(query: str, user_id: str, max_results: int = 20):
    """The ``memory.search.request.SearchRequest`` that ``client.search(query, user_id=user_id,
    record_types=["message"], max_results=max_results)`` builds in HYBRID mode in the default project: what the
    retrieval benchmarks' offline pools (``bench/locomo_tune.py``, ``bench/retrieval_levers.py``) search with.
    Needs Django set up."""
    from memory.core.types import MemorySearchConfig
    from memory.records.tenancy import get_project
    from memory.search.request import CLIENT_SCOPE, build_request, resolve_scope

    return build_request(query, project_id=get_project(None).pk,
                         scope=resolve_scope(CLIENT_SCOPE, client=True, user_id=user_id),
                         config=MemorySearchConfig(mode="HYBRID"), record_types=["message"], max_results=max_results)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 <= q <= 1) of non-empty ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
