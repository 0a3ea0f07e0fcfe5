"""``VectorField`` on both vendors: column type, validation, conversions, checks."""

import array

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import models
from django.test.utils import isolate_apps

from memory.fields import VectorBind, VectorField
from memory.models import SearchChunk


def test_db_type_per_vendor(oracle, sqlite):
    assert VectorField(dimensions=384).db_type(oracle) == "VECTOR(384, FLOAT32)"
    assert VectorField(dimensions=8).db_type(oracle) == "VECTOR(8, FLOAT32)"
    assert VectorField(dimensions=384).db_type(sqlite) == "blob"
    assert SearchChunk._meta.get_field("embedding").db_type(oracle) == "VECTOR(384, FLOAT32)"


def test_not_null_on_oracle_despite_empty_strings_as_null(oracle):
    """Oracle makes columns of fields with empty_strings_allowed nullable
    (``DatabaseFeatures.interprets_empty_strings_as_nulls``)."""
    field = SearchChunk._meta.get_field("embedding")
    assert field.empty_strings_allowed is False
    with oracle.schema_editor(collect_sql=True, atomic=False) as editor:
        definition, _ = editor.column_sql(SearchChunk, field)
    assert definition == "VECTOR(384, FLOAT32) NOT NULL"
    # and no "" converter on fetch
    assert oracle.ops.convert_empty_string not in oracle.ops.get_db_converters(
        field.get_col(SearchChunk._meta.db_table))


@pytest.mark.parametrize("bad", [np.zeros(383), np.zeros(385), np.zeros((2, 384)), [1.0, 2.0], b"\x00" * 12])
def test_wrong_dimension_raises_validation_error(bad, oracle, sqlite):
    field = VectorField(dimensions=384)
    with pytest.raises(ValidationError) as excinfo:
        field.to_python(bad)
    assert excinfo.value.code == "dimensions"
    for connection in (oracle, sqlite):
        with pytest.raises(ValidationError):
            field.get_db_prep_value(bad, connection)


@pytest.mark.parametrize("bad", [[float("nan")] * 4, [float("inf"), 0, 0, 0], ["a", "b", "c", "d"]])
def test_non_finite_or_non_numeric_raises(bad):
    with pytest.raises(ValidationError):
        VectorField(dimensions=4).to_python(bad)


def test_dimensions_must_be_a_valid_oracle_count():
    for bad in (0, 65536, True, 3.0, "384"):
        with pytest.raises(ValueError):
            VectorField(dimensions=bad)
    assert VectorField(dimensions=65535).dimensions == 65535


def test_prep_value_per_vendor(oracle, sqlite):
    field = VectorField(dimensions=4)
    value = [1.0, -2.5, 0.0, 3.25]
    on_oracle = field.get_db_prep_value(value, oracle)
    assert isinstance(on_oracle, VectorBind)
    assert on_oracle.bind_parameter(None) == array.array("f", value)
    on_sqlite = field.get_db_prep_value(value, sqlite)
    assert on_sqlite == np.asarray(value, dtype="<f4").tobytes()
    assert len(on_sqlite) == 16
    assert field.get_db_prep_value(None, oracle) is None and field.get_db_prep_value(None, sqlite) is None


def test_from_db_value_sqlite_bytes(sqlite):
    field = VectorField(dimensions=4)
    raw = np.asarray([0.5, 1.5, -2.0, 8.0], dtype="<f4").tobytes()
    value = field.from_db_value(raw, None, sqlite)
    assert isinstance(value, np.ndarray) and value.dtype == np.float32 and value.shape == (4,)
    np.testing.assert_array_equal(value, [0.5, 1.5, -2.0, 8.0])
    value[0] = 9.0  # a private, writable copy (np.frombuffer alone would be read-only)
    assert field.from_db_value(memoryview(raw), None, sqlite)[0] == 0.5


def test_from_db_value_oracle_array(oracle):
    """python-oracledb fetches VECTOR(n, FLOAT32) as array.array('f') (python-oracledb documentation, "Using VECTOR
    Data")."""
    field = VectorField(dimensions=4)
    value = field.from_db_value(array.array("f", [0.5, 1.5, -2.0, 8.0]), None, oracle)
    assert isinstance(value, np.ndarray) and value.dtype == np.float32
    np.testing.assert_array_equal(value, [0.5, 1.5, -2.0, 8.0])
    assert field.from_db_value(None, None, oracle) is None


def test_round_trip_through_both_storage_forms(oracle, sqlite):
    field = VectorField(dimensions=384)
    vec = np.random.default_rng(3).standard_normal(384).astype("f4")
    blob = field.get_db_prep_value(vec, sqlite)
    np.testing.assert_array_equal(field.from_db_value(blob, None, sqlite), vec)
    bound = field.get_db_prep_value(vec, oracle).bind_parameter(None)
    np.testing.assert_array_equal(field.from_db_value(bound, None, oracle), vec)


def test_deconstruct_keeps_dimensions():
    field = VectorField(dimensions=384, null=True)
    name, path, args, kwargs = field.deconstruct()
    assert path == "memory.fields.VectorField"
    assert kwargs == {"dimensions": 384, "null": True}
    clone = VectorField(*args, **kwargs)
    assert clone.dimensions == 384 and clone.null and not clone.editable


@isolate_apps("memory")
def test_db_index_fails_the_system_check():
    class Indexed(models.Model):
        embedding = VectorField(dimensions=8, db_index=True)

        class Meta:
            app_label = "memory"

    class Plain(models.Model):
        embedding = VectorField(dimensions=8)

        class Meta:
            app_label = "memory"

    errors = Indexed._meta.get_field("embedding").check()
    assert [e.id for e in errors] == ["memory.E001"]
    assert Plain._meta.get_field("embedding").check() == []
