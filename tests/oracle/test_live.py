"""Checks that need a live Oracle Database (23ai/26ai): run when ``OAM_ORACLE_DSN`` is set, skipped otherwise.

With ``OAM_ORACLE_DSN``, ``OAM_ORACLE_USER`` and ``OAM_ORACLE_PASSWORD`` set, ``pytest`` runs the whole suite on
that server (``oam_site.settings`` picks Oracle; Django's test runner makes the test schema: docs/oracle.md
says which user and grants). This module adds what only a server can answer for the paths the offline harness
checks at driver level: the write forms of ``memory.index.bulk``, and the scrub's Oracle Text optimise
(``memory.services.scrub``) removing an erased word from the index's token table. Without ``OAM_ORACLE_DSN`` the
module is skipped with that reason (listed by ``-ra``).
"""

import os

import pytest

if not os.environ.get("OAM_ORACLE_DSN"):
    pytest.skip("OAM_ORACLE_DSN is not set: the live Oracle checks need a server (docs/oracle.md)",
                allow_module_level=True)

from django.db import connection  # noqa: E402 - after the skip: nothing below runs without a server

from memory.client import AgentMemory  # noqa: E402
from memory.index.bulk import uses_single_row_statements  # noqa: E402
from memory.models import SearchChunk  # noqa: E402
from memory.search.backends import KEYWORD_INDEX  # noqa: E402
from memory.services.scrub import storage_scrub  # noqa: E402

LONG = "é" * 2_001  # 4,002 bytes: a CLOB bind


def test_the_suite_runs_on_oracle_23_or_later():
    assert connection.vendor == "oracle" and uses_single_row_statements(connection)
    assert connection.oracle_version >= (23, 4), "VECTOR columns need Oracle Database 23ai"


@pytest.mark.django_db(transaction=True)  # Oracle Text indexes SYNC ON COMMIT
def test_long_and_short_turns_are_written_with_vectors_and_found_again():
    """``add_messages`` through the executemany forms: a turn over 4,000 bytes beside short ones, its
    neighbours' contexts refreshed (CLOB binds for every row), then found by vector and keyword search."""
    thread = AgentMemory(llm=None).create_thread(thread_id="t-live", user_id="u-live")
    thread.add_messages([{"role": "user", "content": text} for text in ("my zebra is called Stripes", LONG,
                                                                        "it likes carrots")])
    thread.add_messages([{"role": "user", "content": "and apples"}])
    contexts = list(SearchChunk.objects.filter(thread_id=thread._row.pk, chunk_index=0).order_by("id")
                    .values_list("context", flat=True))
    assert len(contexts) == 4 and contexts[2].endswith("user: and apples") and LONG in contexts[0]
    results = thread.search("zebra Stripes", max_results=2)
    assert results and results[0].record.content == "my zebra is called Stripes"


@pytest.mark.django_db(transaction=True)  # CTX_DDL.OPTIMIZE_INDEX commits; the erasure commits first
def test_erasure_optimizes_the_text_indexes_and_the_erased_word_leaves_the_token_table():
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-erase", user_id="u-erase").add_messages(
        [{"role": "user", "content": "my secret word is quokkaberry"}])
    receipt = client.erase_user("u-erase")
    assert receipt.storage == {"scrubbed": True, "vendor": "oracle", "text_index_optimized": True}
    assert storage_scrub() == {"vendor": "oracle", "text_index_optimized": True}
    with connection.cursor() as cursor:
        for position in (1, 2):  # Oracle Text keeps an index's tokens in DR$<index>$I (Oracle Text Reference)
            table = connection.ops.quote_name(f"DR${KEYWORD_INDEX}_{position}$I".upper())
            cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE TOKEN_TEXT = %s", ["QUOKKABERRY"])
            assert cursor.fetchone()[0] == 0
