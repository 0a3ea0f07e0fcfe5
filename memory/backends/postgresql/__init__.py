"""PostgreSQL with pgvector: Django's PostgreSQL backend that makes sure the ``vector`` extension exists.

Modules: ``base`` (the ``DatabaseWrapper``).
"""
