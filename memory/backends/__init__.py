"""Database backends of the engine, named by ``DATABASES["default"]["ENGINE"]`` (a stored dotted path).

Packages: ``sqlite_vec`` (Django's SQLite backend with the sqlite-vec extension loaded on each connection),
``postgresql`` (Django's PostgreSQL backend that creates the pgvector extension before migrating).
"""
