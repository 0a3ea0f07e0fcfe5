"""``memory.index.bulk`` on the configured database: what ``add_messages`` writes through it reads back the same,
and SQLite keeps Django's multi-row forms (one multi-row INSERT, a ``CASE`` UPDATE); the Oracle forms are
checked at driver level in ``tests/oracle/test_bulk_writes.py``."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.index.bulk import rows_update, uses_single_row_statements
from memory.models import Message, SearchChunk

LONG = "é" * 2_001  # 4,002 bytes: a CLOB bind on Oracle


def turns(*texts):
    return [{"role": "user", "content": text} for text in texts]


@pytest.mark.django_db
def test_long_and_short_turns_are_stored_and_their_contexts_refreshed(thread):
    """Three turns, one of them over 4,000 bytes with no space (one "word": the 100-word clip keeps it
    whole), then a fourth, which refreshes the contexts of the two before it."""
    thread.add_messages(turns("first turn", LONG, "third turn"))
    thread.add_messages(turns("fourth turn"))
    messages = dict(Message.objects.filter(thread_id=thread._row.pk).values_list("seq", "content"))
    assert [messages[s] for s in sorted(messages)] == ["first turn", LONG, "third turn", "fourth turn"]
    contexts = dict(SearchChunk.objects.filter(thread_id=thread._row.pk, source_kind="message", chunk_index=0)
                    .values_list("text", "context"))
    assert contexts["user: first turn"] == f"user: first turn\nuser: {LONG}\nuser: third turn"
    assert contexts["user: third turn"] == f"user: first turn\nuser: {LONG}\nuser: third turn\nuser: fourth turn"
    assert contexts[f"user: {LONG}"].endswith("user: fourth turn")


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's statement shapes")
def test_sqlite_keeps_djangos_multi_row_forms(thread):
    assert not uses_single_row_statements(connection)
    with CaptureQueriesContext(connection) as queries:
        thread.add_messages(turns("one", "two", "three"))
    inserts = [q["sql"] for q in queries if q["sql"].startswith(('INSERT INTO "oam_messages"',
                                                                 'INSERT INTO "oam_search_chunks"'))]
    assert len(inserts) == 2 and all(sql.count("), (") == 2 for sql in inserts)  # three rows, one statement
    chunks = list(SearchChunk.objects.filter(thread_id=thread._row.pk).order_by("id"))
    for row in chunks:
        row.context = "new " + row.context
    with CaptureQueriesContext(connection) as queries:
        assert rows_update(SearchChunk, chunks, ["context"]) == 3
    [update] = [q["sql"] for q in queries if q["sql"].startswith("UPDATE")]
    assert update.count("WHEN") == 3 and '"context" = CASE' in update
    assert all(c.startswith("new ") for c in SearchChunk.objects.filter(thread_id=thread._row.pk)
               .values_list("context", flat=True))

