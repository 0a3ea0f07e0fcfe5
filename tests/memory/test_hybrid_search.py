"""Keyword index (FTS5), message contexts, fusion and search modes on SQLite for real."""

import pytest
from django.db import connection

from memory.client import AgentMemory
from memory.core.ids import public_id
from memory.core.types import MemorySearchConfig
from memory.index import writer as index
from memory.index.writer import embedding_text
from memory.models import SearchChunk
from memory.search.ranking import fuse
from memory.search.request import keyword_terms
from tests.ids import key


def fts_rowids(match: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rowid FROM oam_search_chunks_fts WHERE oam_search_chunks_fts MATCH %s", [match])
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.backend("sqlite")
def test_fts_triggers_exist_and_follow_inserts_updates_deletes(thread):
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'oam_search_chunks'")
        assert {r[0] for r in cursor.fetchall()} == {f"oam_search_chunks_fts_{s}" for s in ("ai", "ad", "au")}
    mid = thread.add_memory("The zeppelin landed in Lakehurst")
    chunk = SearchChunk.objects.get(record_id=key(mid))
    assert fts_rowids("zeppelin") == {chunk.pk}
    assert fts_rowids("landing") == {chunk.pk}  # porter stemming: landing ~ landed
    thread.update_memory(mid, content="The airship moored at the mast")
    assert fts_rowids("zeppelin") == set()
    new_chunk = SearchChunk.objects.get(record_id=key(mid))
    assert fts_rowids("airship") == {new_chunk.pk}
    thread.delete_memory(mid)
    assert fts_rowids("airship") == set()


def contexts(thread_id):
    rows = SearchChunk.objects.filter(source_kind="message", thread_id=key(thread_id)).order_by("record_id")
    return {public_id(c.record_id): c.context.split("\n") for c in rows}


def test_message_context_holds_two_turns_each_side_and_follows_edits(thread):
    ids = thread.add_messages([{"role": "u", "content": f"turn {i}", "id": f"m{i}"} for i in range(3)])
    thread.add_messages([{"role": "u", "content": f"turn {i}", "id": f"m{i}"} for i in range(3, 6)])
    ctx = contexts("t-main")
    assert ctx["m0"] == ["u: turn 0", "u: turn 1", "u: turn 2"]
    assert ctx["m2"] == ["u: turn 0", "u: turn 1", "u: turn 2", "u: turn 3", "u: turn 4"]  # grew with batch 2
    assert ctx["m5"] == ["u: turn 3", "u: turn 4", "u: turn 5"]
    thread.update_message("m3", content="edited")
    ctx = contexts("t-main")
    assert ctx["m1"][-1] == "u: edited" and ctx["m5"][0] == "u: edited"
    thread.delete_message("m3")
    ctx = contexts("t-main")
    assert ctx["m2"] == ["u: turn 0", "u: turn 1", "u: turn 2", "u: turn 4", "u: turn 5"]
    assert ctx["m5"] == ["u: turn 2", "u: turn 4", "u: turn 5"]
    assert ids == ["m0", "m1", "m2"]


@pytest.mark.backend("sqlite")
def test_contexts_written_at_append_equal_a_full_recompute_and_are_what_the_keyword_index_holds(thread):
    """``add_messages`` stores each new chunk with its final context and refreshes only the turns before it;
    a recompute of every message changes nothing, and the keyword index finds a neighbour's word through
    the context it was inserted with (no update needed)."""
    long_turn = "zanzibar " + "word " * 400  # chunked: several chunks of one message
    batches = [[("u", "alpha one")], [("a", "beta two"), ("u", long_turn)], [("a", "gamma three")],
               [("u", f"delta {i}") for i in range(4)]]
    n = 0
    for batch in batches:
        thread.add_messages([{"role": role, "content": text, "id": f"m{n + i}"}
                             for i, (role, text) in enumerate(batch)])
        n += len(batch)
    chunks = SearchChunk.objects.filter(source_kind="message", thread_id=key("t-main"))
    assert chunks.filter(record_id=key("m2")).count() > 1
    stored = {c.pk: c.context for c in chunks}
    assert index.refresh_message_contexts(key("t-main"), 1, n) == len(stored)
    assert {c.pk: c.context for c in chunks.all()} == stored
    with connection.cursor() as cursor:  # "gamma" is m3's own word; m1's context reaches it (two turns on)
        cursor.execute("SELECT rowid FROM oam_search_chunks_fts WHERE oam_search_chunks_fts MATCH 'context:gamma'")
        holders = {row[0] for row in cursor.fetchall()}
    assert {SearchChunk.objects.get(pk=pk).record_id for pk in holders} >= {key("m1"), key("m3"), key("m5")}


def test_memory_context_is_its_own_text(thread):
    mid = thread.add_memory("likes jasmine tea")
    chunk = SearchChunk.objects.get(record_id=key(mid))
    assert chunk.context == chunk.text == "likes jasmine tea"


def test_embedding_text_carries_the_event_date():
    assert embedding_text("Ann: hi", "2023-05-08T13:56:00") == "[1:56 pm on 8 May, 2023] Ann: hi"
    assert embedding_text("Ann: hi", "2023-05-08T00:05:00+00:00") == "[12:05 am on 8 May, 2023] Ann: hi"
    assert embedding_text("Ann: hi", "yesterday") == "Ann: hi"
    assert embedding_text("Ann: hi", None) == "Ann: hi"


def test_keyword_terms_drop_stopwords_and_punctuation():
    assert keyword_terms("When did Caroline go to the LGBTQ support group?") == [
        "caroline", "go", "lgbtq", "support", "group"]
    assert keyword_terms('"quoted" OR NEAR(x) * -') == ["quoted", "near", "x"]  # no FTS syntax survives
    assert keyword_terms("the of and") == []


def test_fuse_weights_ranks():
    fused = fuse({"vector": [("m", "a"), ("m", "b")], "text": [("m", "b")], "context": [("m", "c")]})
    assert [key for key, _ in fused] == [("m", "c"), ("m", "b"), ("m", "a")]
    assert fused[0][1] == pytest.approx(2 / 11)


def test_keyword_mode_finds_rare_tokens_vectors_blur(client):
    thread = client.create_thread(thread_id="t-kw", user_id="u", agent_id="a")
    thread.add_memory("Order number QX7734 shipped on Monday", memory_id="order")
    for i in range(8):
        thread.add_memory(f"Order number {1000 + i} is delayed", memory_id=f"o{i}")
    keyword = AgentMemory(search_config=MemorySearchConfig(mode="KEYWORD")).get_thread("t-kw")
    assert keyword.search("qx7734", max_results=1)[0].record_id == "order"
    assert thread.search("qx7734", max_results=1)[0].record_id == "order"  # HYBRID


def test_vector_mode_scores_are_similarities_and_modes_are_checked(thread):
    thread.add_memory("The cat sleeps on the sofa", memory_id="cat")
    vector = AgentMemory(search_config=MemorySearchConfig(mode="VECTOR")).get_thread("t-main")
    [hit] = vector.search("kitten napping on a couch", max_results=1)
    assert hit.record_id == "cat" and hit.score == pytest.approx(1 - hit.distance)
    bad = AgentMemory(search_config=MemorySearchConfig(mode="FUZZY")).get_thread("t-main")
    with pytest.raises(ValueError, match="mode"):
        bad.search("cat")


def test_stopword_only_query_still_searches_by_vector(thread):
    thread.add_memory("something", memory_id="m")
    assert [r.record_id for r in thread.search("what is the")] == ["m"]


def test_keyword_arm_respects_scope_and_filters(client):
    mine = client.create_thread(thread_id="t-x", user_id="alice", agent_id="a")
    other = client.create_thread(thread_id="t-y", user_id="bob", agent_id="a")
    mine.add_memory("quasar observation log", memory_id="alice-q", metadata={"k": 1})
    other.add_memory("quasar observation log", memory_id="bob-q")
    keyword = AgentMemory(search_config=MemorySearchConfig(mode="KEYWORD")).get_thread("t-x")
    assert [r.record_id for r in keyword.search("quasar")] == ["alice-q"]
    assert keyword.search("quasar", metadata_filter={"k": 2}) == []


def test_filter_sql_compiles_once_per_search_and_follows_the_request(client, monkeypatch):
    from django.utils import timezone

    from memory import search
    from memory.core.types import SearchScope
    from memory.search.query import filter_sql, filtered_chunks
    from memory.search.request import build_request

    thread = client.create_thread(thread_id="t-f", user_id="alice", agent_id="a")
    thread.add_memory("quasar observation log", memory_id="q", metadata={"k": 1})
    compiled = []
    real = filtered_chunks
    monkeypatch.setattr(search.query, "filtered_chunks", lambda *a, **k: compiled.append(1) or real(*a, **k))
    keyword = AgentMemory(search_config=MemorySearchConfig(mode="KEYWORD")).get_thread("t-f")
    assert [r.record_id for r in keyword.search("quasar observation")] == ["q"]
    assert len(compiled) == 1  # the text and context arms share one compiled clause

    def fresh(request, now):
        qs = real(request, now)
        return qs.query.get_compiler(connection=connection).compile(qs.query.where)

    request = build_request("quasar", project_id=client.project.pk, scope=SearchScope(user_id="alice"),
                                   config=MemorySearchConfig(), metadata_filter={"k": 1})
    now = timezone.now()
    assert filter_sql(request, now) == fresh(request, now)
    assert filter_sql(request, now) == fresh(request, now) and len(compiled) == 2  # compiled once, reused
    request.metadata_filter["k"] = 2  # changed in place
    changes = [dict(scope=SearchScope(user_id="bob")), dict(record_types=["message"]),
               dict(include_invalid_results=False), dict(project_id=client.project.pk + 1)]
    for change in [{}, *changes]:
        for name, value in change.items():
            setattr(request, name, value)
        before = len(compiled)
        assert filter_sql(request, now) == fresh(request, now) and len(compiled) == before + 1
    later = timezone.now()
    assert filter_sql(request, later) == fresh(request, later)
    assert filter_sql(request)[0] == fresh(request, later)[0]  # without now: compiled each time


def test_search_reads_its_records_unordered(thread):
    """The ranking orders results: the record reads neither join the thread nor sort (bench/tenancy_cost.py).

    HYBRID reads each kind twice: the pool's columns for the second stage (``ranking.MESSAGE_COLUMNS``,
    ``MEMORY_COLUMNS``), then the results' whole rows."""
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    thread.add_messages([{"role": "user", "content": "the lighthouse keeper's logbook", "id": "m1"}])
    thread.add_memory("the lighthouse keeper keeps a logbook", memory_id="k1")
    with CaptureQueriesContext(conn) as queries:
        found = {r.record_id for r in thread.search("lighthouse logbook", record_types=["message", "memory"])}
    assert found == {"m1", "k1"}
    reads = [q["sql"] for q in queries if q["sql"].startswith(('SELECT "oam_messages"', 'SELECT "oam_memories"'))]
    assert len(reads) == 4
    assert not any("JOIN" in sql or "ORDER BY" in sql for sql in reads), reads
    pool = [sql for sql in reads if '"metadata"' not in sql]  # the second stage's columns: no metadata
    assert len(pool) == 2 and all('"content"' in sql for sql in pool), reads


# --- the two ranking faults -------------------------------------------------------


def test_neighbours_words_do_not_outrank_a_turns_own_meaning(client):
    """A turn is not credited with its neighbour's words as if they were its own.

    "My receipt" (cosine distance ~0.82 to the query) once ranked above "I love pizza." (~0.45) for
    "what food does the user like?": both turns' text and context (the two turns together) match only
    "user" (the role), a term of every chunk whose BM25 is ~1e-6, yet rank fusion credited "My receipt"
    first in both keyword arms (shorter text; the context weighted twice). Such matches now get no credit,
    and the vector arm decides.
    """
    thread = client.create_thread(thread_id="t-food", user_id="u-food", agent_id="a")
    thread.add_messages([{"role": "user", "content": "My receipt", "id": "receipt"},
                         {"role": "user", "content": "I love pizza.", "id": "pizza"}])
    for results in (thread.search("what food does the user like?"),
                    client.search("what food does the user like?", user_id="u-food")):
        ranked = [r.record_id for r in results]
        assert ranked == ["pizza", "receipt"], [(r.record_id, r.distance, r.score) for r in results]


def test_a_superseded_memory_never_outranks_its_replacement(client):
    """A memory superseded by another (spec: add_memory link_type="supersedes"; the target turns invalid)
    ranks below the memory that replaced it. Invalid records are still returned by default
    (spec: include_invalid_results, omitted means True), and left out with False."""
    thread = client.create_thread(thread_id="t-move", user_id="u-move", agent_id="a")
    old = thread.add_memory("The user lives in Paris", memory_id="paris")
    new = thread.add_memory("The user moved to Berlin", memory_id="berlin", memory_id_to_link=old,
                            link_type="supersedes")
    query = "where does the user live?"
    assert thread.search(query, max_results=1)[0].record_id == new
    for results in (thread.search(query), client.search(query, user_id="u-move")):
        ranked = [r.record_id for r in results]
        assert ranked == [new, old], [(r.record_id, r.distance, r.score, r.record.status) for r in results]
        assert results[0].score >= results[1].score
    assert [r.record_id for r in thread.search(query, include_invalid_results=False)] == [new]

    # A replacement linked with link_records, and a chain: the newest first.
    newest = thread.add_memory("The user now lives in Lisbon", memory_id="lisbon", autonomous_linking=False)
    thread.link_records(source_record_id=newest, source_record_type="memory", target_record_id=new,
                        target_record_type="memory", relation_type="supersedes")
    ranked = [r.record_id for r in thread.search(query)]
    assert ranked.index(newest) < ranked.index(new) < ranked.index(old), ranked


def test_hybrid_ranks_first_the_turn_of_the_speaker_the_query_names(thread, monkeypatch, settings):
    """Second stage: the turn of the speaker the query names outranks the other speaker's turn that asked the
    same question (the fusion alone puts the asking turn first). The query shares no content word with either
    turn: with the tuned weights a turn that shares the question's words ("last weekend") gains as much from
    them (``terms``) as the named speaker's turn gains from its name, which on LoCoMo's tuning half was the
    better trade (hit@1 0.434 -> 0.488). Without the query adapter: with it the vector arm already puts the
    answer first (tests/memory/test_query_adapter.py), and this is the second stage's test."""
    import dataclasses

    settings.OAM_QUERY_ADAPTER = "off"

    from memory.search import second_stage

    thread.add_messages([
        {"role": "Caroline", "content": "Melanie, what did you do last weekend?", "id": "c1"},
        {"role": "Melanie", "content": "I went camping with the kids.", "id": "m1"},
    ])
    client = AgentMemory()

    def top(query):
        results = client.search(query, user_id="user-1", record_types=["message"], max_results=2)
        return [r.record.id for r in results]

    query = "What did Melanie do?"
    weights = second_stage.WEIGHTS
    monkeypatch.setattr(second_stage, "WEIGHTS", dataclasses.replace(
        weights, **{name: 0.0 for name in second_stage.SIGNALS if name != "rrf"}))
    assert top(query) == ["c1", "m1"]  # the fusion alone: the asking turn wins
    monkeypatch.setattr(second_stage, "WEIGHTS", weights)
    assert top(query) == ["m1", "c1"]
    assert top("What did melanie do?") == ["m1", "c1"]  # case-insensitive
