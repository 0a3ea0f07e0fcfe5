"""Vector storage for embeddings: ``VectorField`` and the ``VectorDistance`` expression.

One Python value on every backend, a ``numpy.ndarray`` of float32 with shape
``(dimensions,)``; the column type depends on the database:

* Oracle Database 23ai/26ai: ``VECTOR(N, FLOAT32)``, bound through python-oracledb
  as ``array.array("f")`` (python-oracledb binds ``VECTOR`` values as ``array.array``; Django's
  ``OracleParam`` would ``str()`` an array, so it travels in a wrapper with
  ``bind_parameter`` and ``input_size``).
* PostgreSQL with pgvector: ``vector(N)`` (float4), bound as pgvector's text form
  ``'[0.1,0.2,...]'`` (an untyped literal that PostgreSQL resolves to ``vector`` by
  context) and read back from the same text (psycopg knows no ``vector`` type
  unless one registers it; the engine never needs to).
* SQLite: a BLOB of little-endian float32, the layout sqlite-vec reads.

``VectorDistance`` ranks rows in SQL: ``VECTOR_DISTANCE(col, :q, COSINE)`` on
Oracle, ``col <=> q`` on PostgreSQL (pgvector), ``vec_distance_cosine(col, ?)`` on
SQLite (sqlite-vec). All return a distance where smaller is closer (cosine distance
= 1 - cosine similarity).
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np
from django.core import checks, exceptions
from django.db import models
from django.db.models import FloatField, Func, Value

METRICS = {
    # metric: (Oracle token, sqlite-vec function)
    "COSINE": ("COSINE", "vec_distance_cosine"),
    "EUCLIDEAN": ("EUCLIDEAN", "vec_distance_l2"),
}

#: pgvector's distance operator and HNSW operator class of each metric (pgvector README, "Querying").
PGVECTOR_METRICS = {
    "COSINE": ("<=>", "vector_cosine_ops"),
    "EUCLIDEAN": ("<->", "vector_l2_ops"),
}


def pgvector_text(values) -> str:
    """A float32 vector in pgvector's text form, ``[x1,x2,...]``; ``repr`` of each float32 as a float keeps it
    exact (a float32 printed with ``float.__repr__`` parses back to the same float32)."""
    return "[" + ",".join(map(repr, np.asarray(values, dtype="<f4").astype(float).tolist())) + "]"


class VectorBind:
    """Bind wrapper so Django's Oracle cursor passes a float32 array as a VECTOR.

    ``OracleParam`` calls ``bind_parameter(cursor)`` and uses ``input_size``
    (``oracledb.DB_TYPE_VECTOR``) for ``setinputsizes``. Hashable by identity,
    which Django's parameter de-duplication requires.
    """

    def __init__(self, values: np.ndarray):
        self.values = array.array("f", np.asarray(values, dtype="<f4").tolist())

    @property
    def input_size(self):
        import oracledb  # deferred: only an Oracle database has the driver installed

        return oracledb.DB_TYPE_VECTOR

    def bind_parameter(self, cursor) -> array.array:
        return self.values

    def __repr__(self) -> str:
        return f"VectorBind(<{len(self.values)} x float32>)"


def to_vector(value: Any, dimensions: int) -> np.ndarray:
    """Coerce ``value`` (sequence, ndarray, array.array or float32 bytes) to float32.

    Raises ``ValidationError`` when the result is not one-dimensional with
    exactly ``dimensions`` finite entries.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        vec = np.frombuffer(bytes(value), dtype="<f4")
    else:
        try:
            vec = np.asarray(value, dtype="<f4")
        except (TypeError, ValueError) as exc:
            raise exceptions.ValidationError(f"not a numeric vector: {exc}", code="invalid") from exc
    if vec.ndim != 1 or vec.shape[0] != dimensions:
        raise exceptions.ValidationError(
            f"expected a vector of {dimensions} dimensions, got shape {vec.shape}",
            code="dimensions",
        )
    if not np.all(np.isfinite(vec)):
        raise exceptions.ValidationError("vector has NaN or infinite entries", code="finite")
    return vec


class VectorField(models.Field):
    """A fixed-size float32 embedding column.

    ``VectorField(dimensions=384)`` is ``VECTOR(384, FLOAT32)`` on Oracle and a
    float32 BLOB on SQLite. Values are ``numpy.ndarray`` (float32, shape
    ``(dimensions,)``); a wrong length raises ``ValidationError`` on save.
    Never indexed by Django (a B-tree on a vector is useless): vector indexes are
    created by ``memory.operations.CreateVectorIndex`` in migrations.
    """

    description = "Embedding vector (float32)"
    empty_strings_allowed = False  # NOT NULL on Oracle, no "" converter

    def __init__(self, *args, dimensions: int, **kwargs):
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= 65535:
            raise ValueError("dimensions must be an int from 1 to 65535 (Oracle VECTOR limit)")
        self.dimensions = dimensions
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def check(self, **kwargs):
        errors = super().check(**kwargs)
        if self.db_index:
            errors.append(
                checks.Error("VectorField cannot have db_index=True", obj=self, id="memory.E001")
            )
        return errors

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["dimensions"] = self.dimensions
        kwargs.pop("editable", None)
        return name, path, args, kwargs

    def db_type(self, connection) -> str:
        if connection.vendor == "oracle":
            return f"VECTOR({self.dimensions}, FLOAT32)"
        if connection.vendor == "postgresql":
            return f"vector({self.dimensions})"
        return "blob"

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return np.frombuffer(bytes(value), dtype="<f4").copy()
        if isinstance(value, str):  # pgvector's text form "[1,2,3]"
            return np.array(value.strip("[]").split(","), dtype="<f4") if value != "[]" else np.zeros(0, "<f4")
        return np.asarray(value, dtype="<f4")  # oracledb returns array.array('f')

    def to_python(self, value):
        if value is None:
            return None
        return to_vector(value, self.dimensions)

    def get_prep_value(self, value):
        if value is None:
            return None
        return to_vector(value, self.dimensions)

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        vec = value if prepared else self.get_prep_value(value)
        if connection.vendor == "oracle":
            return VectorBind(vec)
        if connection.vendor == "postgresql":
            return pgvector_text(vec)
        return np.asarray(vec, dtype="<f4").tobytes()

    def value_to_string(self, obj):
        value = self.value_from_object(obj)
        return None if value is None else [float(x) for x in value]


class VectorDistance(Func):
    """Distance between a vector column and a query vector, computed in SQL.

    ``VectorDistance("embedding", query_vector, metric="COSINE")``; smaller is
    closer. Metrics: COSINE (default) and EUCLIDEAN. On Oracle the metric must
    equal the vector index's DISTANCE or the index is not used
    (Oracle AI Vector Search User's Guide, "Vector Distance Metrics").
    """

    output_field = FloatField()

    def __init__(self, expression, vector, *, metric: str = "COSINE", dimensions: int | None = None, **extra):
        metric = metric.upper()
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
        self.metric = metric
        if not hasattr(vector, "resolve_expression"):
            vec = np.asarray(vector, dtype="<f4")
            vector = Value(vec, output_field=VectorField(dimensions=dimensions or int(vec.shape[0])))
        super().__init__(expression, vector, **extra)

    def as_sql(self, compiler, connection, **extra_context):
        raise NotImplementedError(f"VectorDistance is not supported on {connection.vendor}")

    def as_sqlite(self, compiler, connection, **extra_context):
        function = METRICS[self.metric][1]
        return super().as_sql(compiler, connection, function=function, **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        """``((col <=> q) + 0)``: exact, as on SQLite. A bare ``col <=> q`` in an ORDER BY lets PostgreSQL answer
        with the HNSW index (an incremental sort adds ``id``), which returns ``hnsw.ef_search`` candidates
        before the WHERE clause and so silently drops filtered rows (seen: a thread's nearest memories lost
        among other threads' entries). The search arm uses the index on purpose, with an iterative scan and an
        exact fallback (``memory.search.backends.PostgresBackend``)."""
        operator = PGVECTOR_METRICS[self.metric][0]
        return super().as_sql(compiler, connection, template="((%(expressions)s) + 0)", arg_joiner=f" {operator} ",
                              **extra_context)

    def as_oracle(self, compiler, connection, **extra_context):
        token = METRICS[self.metric][0]
        return super().as_sql(
            compiler,
            connection,
            function="VECTOR_DISTANCE",
            template=f"%(function)s(%(expressions)s, {token})",
            **extra_context,
        )
