"""Row locks compile for Oracle without a row limit (ORA-02014 forbids FOR UPDATE with FETCH FIRST)."""

import pytest
from django.db import NotSupportedError

from memory.models import Memory


@pytest.fixture
def in_transaction(oracle, oracle_driver):
    """FOR UPDATE compiles only outside autocommit, as inside ``transaction.atomic()``."""
    before, oracle.autocommit = oracle.autocommit, False
    yield oracle
    oracle.autocommit = before


def test_lock_first_query_has_for_update_and_no_fetch_first(in_transaction):
    qs = Memory.objects.filter(pk="m-1", thread_id="t").select_for_update().order_by()
    sql, params = qs.query.get_compiler(connection=in_transaction).as_sql()
    assert sql.endswith("FOR UPDATE") and "FETCH FIRST" not in sql and "ORDER BY" not in sql
    assert params == ("m-1", "t")


def test_first_with_for_update_is_refused_on_oracle(in_transaction):
    qs = Memory.objects.filter(pk="m-1").select_for_update()[:1]
    with pytest.raises(NotSupportedError):
        qs.query.get_compiler(connection=in_transaction).as_sql()
