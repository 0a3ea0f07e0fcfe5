"""PostgreSQL backend with pgvector, chosen by ``OAM_DATABASE_URL`` (``oam_site.settings``).

Django's own PostgreSQL backend (psycopg 3) with one addition, the PostGIS
pattern (``django.contrib.gis.db.backends.postgis``): ``prepare_database``,
which ``manage.py migrate`` and the test database's creation call before any
migration, runs ``CREATE EXTENSION IF NOT EXISTS vector`` when it is missing.
pgvector is not a trusted extension, so only a superuser may create it: a
service role that is not one needs a DBA to run it once per database
beforehand; ``memory.checks.check_database`` (``memory.E005``, run by
``migrate`` before this) names that case instead of a bare "permission denied".

What the engine stores per column on this backend: ``memory.fields.VectorField``
is ``vector(N)`` (pgvector), ``JSONField`` is ``jsonb``, the keyword index is a
generated ``tsvector`` column per text column with a GIN index and the vector
index is HNSW (``memory.operations``).

Use it with ``ENGINE = "memory.backends.postgresql"``.
"""

from __future__ import annotations

from django.db.backends.postgresql import base as postgresql_base

#: The extension that provides ``vector(N)``, ``<=>`` and HNSW (pgvector 0.8: iterative index scans).
VECTOR_EXTENSION = "vector"


class DatabaseWrapper(postgresql_base.DatabaseWrapper):
    """Django's PostgreSQL ``DatabaseWrapper`` that creates the ``vector`` extension before migrating."""

    def prepare_database(self):
        super().prepare_database()
        with self.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = %s", [VECTOR_EXTENSION])
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE EXTENSION IF NOT EXISTS {VECTOR_EXTENSION}")
