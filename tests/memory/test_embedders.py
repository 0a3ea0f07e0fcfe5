"""``MicroBatchingEmbedder``: concurrent calls share forward passes, each gets exactly its rows, in fair turns."""

from __future__ import annotations

import threading
import time
import zlib

import numpy as np
import pytest

from memory.core.batching import MicroBatchingEmbedder, embedding_flow, length_batches
from memory.embedders import get_embedder


class FakeEmbedder:
    """Deterministic 8-d vectors from each text's CRC; the first pass can be held until released."""

    dimensions = 8

    def __init__(self, fail_on: str | None = None):
        self.calls: list[list[str]] = []
        self.hold_first = threading.Event()
        self.hold_first.set()
        self.in_first = threading.Event()
        self.fail_on = fail_on

    @staticmethod
    def vector(text: str) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        v = rng.standard_normal(8).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed(self, texts):
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.in_first.set()
            assert self.hold_first.wait(10)
        if self.fail_on and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.stack([self.vector(t) for t in texts])


def queued_calls(batcher) -> int:
    """Calls with texts not yet handed to a pass."""
    return sum(len(calls) for calls in batcher._flows.values())


def run_concurrently(batcher, inner, per_call: list[list[str]], flows: list | None = None):
    """Hold the first pass until every other caller is queued (in the order given, each in ``flows[i]``
    when given), then let them all finish."""
    inner.hold_first.clear()
    results, errors = {}, {}

    def worker(i):
        try:
            with embedding_flow(flows[i] if flows else None):
                results[i] = batcher.embed(per_call[i])
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            errors[i] = exc

    first = threading.Thread(target=worker, args=(0,))
    first.start()
    assert inner.in_first.wait(10)
    others = []
    for i in range(1, len(per_call)):  # one by one, so the queue holds them in this order
        others.append(threading.Thread(target=worker, args=(i,)))
        others[-1].start()
        deadline = time.monotonic() + 10
        while queued_calls(batcher) < i and time.monotonic() < deadline:
            time.sleep(0.002)
        assert queued_calls(batcher) == i
    inner.hold_first.set()
    for t in [first, *others]:
        t.join(10)
        assert not t.is_alive()
    return results, errors


def test_concurrent_calls_share_one_pass_and_each_gets_its_own_rows():
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner, max_texts=512)
    per_call = [[f"call {i} text {j}" for j in range(i % 4 + 1)] for i in range(9)]
    results, errors = run_concurrently(batcher, inner, per_call)
    assert not errors
    for i, texts in enumerate(per_call):
        assert results[i].shape == (len(texts), 8)
        np.testing.assert_array_equal(results[i], np.stack([FakeEmbedder.vector(t) for t in texts]))
    # the first caller's pass ran alone; the 8 that queued behind it shared the second pass
    assert len(inner.calls) == 2 and inner.calls[0] == per_call[0]
    assert sorted(inner.calls[1]) == sorted(t for texts in per_call[1:] for t in texts)
    assert batcher.passes == 2 and batcher.texts_embedded == sum(map(len, per_call))


def test_a_pass_holds_at_most_max_texts_and_a_larger_call_spans_passes():
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner, max_texts=5)
    per_call = [["a"], ["b1", "b2", "b3"], ["c1", "c2", "c3"], ["d"] * 2, [f"e{j}" for j in range(7)]]
    results, errors = run_concurrently(batcher, inner, per_call)
    assert not errors
    for i, texts in enumerate(per_call):
        np.testing.assert_array_equal(results[i], np.stack([FakeEmbedder.vector(t) for t in texts]))
    assert all(len(call) <= 5 for call in inner.calls)
    assert sum(map(len, inner.calls)) == sum(map(len, per_call))


def test_an_error_reaches_every_caller_of_its_pass_and_the_next_calls_still_work():
    inner = FakeEmbedder(fail_on="poison")
    batcher = MicroBatchingEmbedder(inner)
    per_call = [["first"], ["x"], ["poison"], ["y"]]
    results, errors = run_concurrently(batcher, inner, per_call)
    assert set(results) == {0} and set(errors) == {1, 2, 3}
    assert all("poison" in str(e) for e in errors.values())
    np.testing.assert_array_equal(batcher.embed(["after"]), FakeEmbedder.vector("after")[None, :])
    assert not batcher._busy and not batcher._flows


def test_an_idle_call_runs_at_once_and_empty_input_makes_no_pass():
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner)
    assert batcher.embed([]).shape == (0, 8)
    out = batcher.embed(["only"])
    np.testing.assert_array_equal(out, FakeEmbedder.vector("only")[None, :])
    assert inner.calls == [["only"]] and batcher.passes == 1
    with pytest.raises(ValueError, match="max_texts"):
        MicroBatchingEmbedder(inner, max_texts=0)


def test_the_real_model_gives_the_same_vectors_batched_across_callers():
    """all-MiniLM-L6-v2 through the process embedder: shared passes change no vector beyond float noise."""
    embedder = get_embedder()
    assert isinstance(embedder, MicroBatchingEmbedder)
    per_call = [
        ["I love pizza."],
        ["Caroline went to the LGBTQ support group on 7 May 2023.", "short"],
        ["Melanie painted a sunrise over the lake last year, and she plans another one soon." * 3],
        ["What food does the user like?", "receipt", "The taxi cost 42 EUR."],
    ]
    alone = [embedder.inner.embed(texts) for texts in per_call]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, embedder.embed(per_call[i])))
               for i in range(len(per_call))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, texts in enumerate(per_call):
        assert results[i].shape == (len(texts), 384)
        np.testing.assert_allclose(results[i], alone[i], atol=2e-5)


def test_a_search_queued_behind_a_large_batch_of_another_project_is_in_the_next_pass():
    """Issue #29: one project's 1,000-message batch made another project's searches wait 33.6 s (they queued
    behind two 500-text parts). Now a pass holds at most ``pass_chars`` characters, taken in turns."""
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner, pass_chars=1_000)
    batch = [f"turn {j:04d} " + "x" * 90 for j in range(1_000)]  # 100 characters each: 10 a pass
    per_call = [["first"], batch, ["what does the user like?"]]
    results, errors = run_concurrently(batcher, inner, per_call, flows=[None, ("project", 1), ("project", 2)])
    assert not errors
    np.testing.assert_array_equal(results[2], FakeEmbedder.vector("what does the user like?")[None, :])
    np.testing.assert_array_equal(results[1], np.stack([FakeEmbedder.vector(t) for t in batch]))
    assert "what does the user like?" in inner.calls[1]  # the pass after the one running when it came
    assert len(inner.calls[1]) == 4  # and a short one: a round of one turn each (3 of the batch's texts)
    assert all(sum(len(t) + 1 for t in call) <= 1_000 for call in inner.calls)
    assert len(inner.calls) >= 100


def test_flows_take_turns_and_a_projects_many_calls_share_one_turn():
    """Two calls of project 1 and one of project 2, all large: project 2 gets half of each pass, not a third."""
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner, pass_chars=400, quantum=100)
    calls = [[f"{name} {j:03d} " + "y" * 40 for j in range(100)] for name in ("a", "b", "c")]
    per_call = [["first"], *calls]
    results, errors = run_concurrently(batcher, inner, per_call,
                                       flows=[None, ("project", 1), ("project", 1), ("project", 2)])
    assert not errors
    for i, texts in enumerate(per_call):
        np.testing.assert_array_equal(results[i], np.stack([FakeEmbedder.vector(t) for t in texts]))
    # while all three have texts left (the first ten passes hold ~80 of their 300), project 1's turns
    # alternate a and b and project 2's are c's: c gets as much as a and b together, within two turns
    # (a pass may cut a turn short)
    shares = {name: sum(t.startswith(name + " ") for call in inner.calls[1:11] for t in call) for name in "abc"}
    assert abs(shares["c"] - (shares["a"] + shares["b"])) <= 6
    assert abs(shares["a"] - shares["b"]) <= 6 and shares["a"] > 0
    with pytest.raises(ValueError, match="pass_chars"):
        MicroBatchingEmbedder(inner, pass_chars=0)


def test_a_text_longer_than_a_pass_still_goes_alone_and_counts_at_most_text_chars():
    inner = FakeEmbedder()
    batcher = MicroBatchingEmbedder(inner, pass_chars=100)
    texts = ["z" * 50_000, "short", "w" * 150]
    np.testing.assert_array_equal(batcher.embed(texts), np.stack([FakeEmbedder.vector(t) for t in texts]))
    assert inner.calls == [["z" * 50_000], ["short"], ["w" * 150]]


class OneCoreFake(FakeEmbedder):
    """``FakeEmbedder`` with ``embed_on_one_core``: records each pass's thread; passes can be made to meet."""

    def __init__(self, meet: int = 0, fail_on: str | None = None):
        super().__init__(fail_on=fail_on)
        self.threads: list[str] = []
        self.meeting = threading.Barrier(meet, timeout=10) if meet else None

    def embed_on_one_core(self, texts):
        self.threads.append(threading.current_thread().name)
        if self.meeting is not None:
            self.meeting.wait()  # raises BrokenBarrierError unless ``meet`` passes run at the same time
        if self.fail_on and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return np.stack([self.vector(t) for t in texts])

    def embed(self, texts):  # pragma: no cover - the workers must not use it
        raise AssertionError("workers embed on one core")


def test_a_large_call_is_cut_into_parts_that_two_workers_embed_at_the_same_time():
    inner = OneCoreFake(meet=2)
    batcher = MicroBatchingEmbedder(inner, workers=2)
    texts = [f"text {i}" for i in range(40)]
    out = batcher.embed(texts)
    np.testing.assert_array_equal(out, np.stack([FakeEmbedder.vector(t) for t in texts]))
    # two passes met at the barrier, each in a worker thread of its own, 20 texts each
    assert batcher.passes == 2 and batcher.texts_embedded == 40
    assert sorted(inner.threads) == ["oam-embedder-0", "oam-embedder-1"]
    assert not batcher._busy and not batcher._flows


def test_a_call_below_two_parts_runs_whole_and_concurrent_calls_each_get_their_rows():
    inner = OneCoreFake()
    batcher = MicroBatchingEmbedder(inner, workers=2)
    assert batcher.embed(["one"]).shape == (1, 8) and batcher.passes == 1  # 1 text: one part
    per_call = [[f"call {i} text {j}" for j in range(i + 1)] for i in range(12)]
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, batcher.embed(per_call[i])))
               for i in range(len(per_call))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for i, texts in enumerate(per_call):
        np.testing.assert_array_equal(results[i], np.stack([FakeEmbedder.vector(t) for t in texts]))
    assert batcher.texts_embedded == 1 + sum(map(len, per_call))


def test_an_error_in_one_part_fails_its_call_only_after_every_part_is_back():
    inner = OneCoreFake(fail_on="text 7")
    batcher = MicroBatchingEmbedder(inner, workers=2)
    with pytest.raises(RuntimeError, match="text 7"):
        batcher.embed([f"text {i}" for i in range(40)])  # parts 0-19 (fails) and 20-39
    assert batcher.passes == 2 and not batcher._busy and not batcher._flows
    np.testing.assert_array_equal(batcher.embed(["after"]), FakeEmbedder.vector("after")[None, :])
    with pytest.raises(ValueError, match="workers"):
        MicroBatchingEmbedder(inner, workers=0)


def test_an_embedder_without_one_core_passes_gets_one_worker():
    assert MicroBatchingEmbedder(FakeEmbedder()).workers == 1
    assert MicroBatchingEmbedder(OneCoreFake(), workers=3).workers == 3


def test_the_real_model_on_one_core_gives_the_same_vectors_side_by_side():
    """``embed_on_one_core`` from two threads at once equals ``embed``, within float noise."""
    embedder = get_embedder()
    model = embedder.inner
    texts = [f"Caroline met Melanie on day {i} to talk about painting and the support group." for i in range(24)]
    texts += ["short", "I love pizza.", "What food does the user like?"]
    reference = model.embed(texts)
    results = {}
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, model.embed_on_one_core(texts)))
               for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k in range(2):
        np.testing.assert_allclose(results[k], reference, atol=2e-5)
    np.testing.assert_allclose(MicroBatchingEmbedder(model, workers=2).embed(texts), reference, atol=2e-5)


def padded_cost(lengths, batches, overhead):
    return sum(len(b) * max(lengths[i] for i in b) + overhead for b in batches)


def test_length_batches_partition_the_inputs_and_pad_less_than_fixed_batches():
    """Inputs of two length groups: fixed batches of 4 over the sorted lengths mix a short input into a
    batch of long ones; the split cuts where the lengths jump instead, never above ``max_batch``."""
    lengths = [30, 500, 31, 32, 480, 29, 33, 490, 28, 510]
    batches = length_batches(lengths, max_batch=4, overhead=10)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(1 <= len(b) <= 4 for b in batches)
    assert [sorted(lengths[i] for i in b) for b in batches] == [[28, 29, 30], [31, 32, 33], [480, 490],
                                                               [500, 510]]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    fixed = [order[k:k + 4] for k in range(0, len(order), 4)]
    assert padded_cost(lengths, batches, 10) < padded_cost(lengths, fixed, 10)


def test_length_batches_fill_whole_batches_when_a_pass_costs_more_than_padding():
    lengths = [10, 20, 30, 40, 50, 60, 70]
    batches = length_batches(lengths, max_batch=3, overhead=1e9)
    assert len(batches) == 3  # the fewest passes; among those, the least padding: the short ones together
    assert [[lengths[i] for i in b] for b in batches] == [[10, 20], [30, 40], [50, 60, 70]]
    assert length_batches([], max_batch=3, overhead=1.0) == []
    with pytest.raises(ValueError, match="max_batch"):
        length_batches([1], max_batch=0, overhead=1.0)
    with pytest.raises(ValueError, match="overhead"):  # an infinite pass cost would make every split cost the same
        length_batches([1], max_batch=3, overhead=float("inf"))


def test_the_real_model_gives_the_same_vectors_whatever_the_batches():
    """Cutting a call into length batches changes no vector beyond float noise, and keeps the input order."""
    embedder = get_embedder().inner
    texts = ["short", "I love pizza.", "Melanie painted a sunrise over the lake. " * 12, "receipt",
             "What food does the user like?", "The taxi cost 42 EUR on the way to the airport in May."]
    together = embedder.embed(texts)
    for i, text in enumerate(texts):
        np.testing.assert_allclose(together[i], embedder.embed([text])[0], atol=2e-5)


class AsymmetricFake(FakeEmbedder):
    """An embedder that embeds queries differently (as E5 does with its "query: " prefix)."""

    def embed_query(self, texts):
        return np.stack([self.vector("query: " + t) for t in texts])


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "micro-batched"])
def test_a_search_query_uses_the_embedders_query_side_when_it_has_one(monkeypatch, wrapped):
    from memory import embedders

    inner = AsymmetricFake()
    monkeypatch.setattr(embedders, "_embedder", MicroBatchingEmbedder(inner, workers=1) if wrapped else inner)
    vector = embedders.embed_query("pizza")
    np.testing.assert_allclose(vector, FakeEmbedder.vector("query: pizza"))
    assert inner.calls == []  # the record side was not used


def test_a_search_query_uses_embed_when_the_embedder_is_symmetric(monkeypatch):
    from memory import embedders

    inner = FakeEmbedder()
    monkeypatch.setattr(embedders, "_embedder", MicroBatchingEmbedder(inner, workers=1))
    np.testing.assert_allclose(embedders.embed_query("pizza"), FakeEmbedder.vector("pizza"))
    assert inner.calls == [["pizza"]]
