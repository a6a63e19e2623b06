"""Continuous batching with the tiny model on CPU (fp32, exact reference backend): the same greedy
tokens as a bin at a time, documents handed back as they finish, freed seats refilled; the GPU
stages built on it hand each document to finishing once, as soon as it is decoded."""

from __future__ import annotations

import queue
import time

import pytest
from stage_fakes import gpu_stage, FakePacker, FakeSink, Generated, bin_of, make_doc, registered
from engine_helpers import _docs, _engine, _stage

from worker.engine.tiny import make_tiny_checkpoint
from worker.packer import PackerConfig
from worker.pipeline.inflight import DocRegistry
from worker.observability.metrics import Metrics
from worker.pipeline.stage import Shared
from worker.pipeline.tracker import OffsetTracker


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("qwen2"), arch="qwen2", seed=1)


def _frequent_token(eng, docs) -> int:
    counts: dict[int, int] = {}
    for o in eng.generate(_stage(eng, docs)):
        for t in o.token_ids[1:8]:
            counts[t] = counts.get(t, 0) + 1
    return max(counts, key=counts.get)


def _run(batcher, eng, bins, seeds, limits=None):
    """Feed bins as the batcher wants work; per document (tag) its output and the step it left at."""
    got, step, nxt = {}, 0, 0
    while nxt < len(bins) or batcher.busy:
        while nxt < len(bins) and (not batcher.busy or batcher.wants_work()):
            tags = list(range(sum(len(b) for b in bins[:nxt]), sum(len(b) for b in bins[: nxt + 1])))
            batcher.add(_stage(eng, bins[nxt]), [seeds[t] for t in tags], tags,
                        None if limits is None else [limits[t] for t in tags])
            nxt += 1
        before = dict(eng.stats)
        r = batcher.step()
        for tag, gen, gpu_s in r.done:
            assert tag not in got and gpu_s > 0
            got[tag] = (gen, step)
        steps, rows = (eng.stats[k] - before[k] for k in ("decode_steps", "live_row_steps"))
        assert steps > 0 and 0 < rows // steps <= batcher.sched.seats and rows % steps == 0  # every step decodes
        step += 1
    return got


def test_continuous_batching_gives_the_greedy_tokens_of_a_bin_at_a_time(tiny):
    """EOS mid-way, per-document limits and three bins through 5 seats and a 40-token prefill budget."""
    docs = _docs(36, 3, 30, 500, seed=11)
    eng = _engine(tiny, max_new_tokens=12, check_every=2)
    eng.eos_ids = (_frequent_token(eng, docs),)
    limits = [(3, 12, 7)[i % 3] for i in range(len(docs))]
    seeds = list(range(len(docs)))
    eng.limits = lambda s: [limits[x] for x in s]  # the bin path takes limits from the seeds
    ref = eng.generate(_stage(eng, docs), seeds)
    got = _run(eng.batcher(seats=5, kv_rows=250, prefill_tokens=40), eng, [docs[:12], docs[12:24], docs[24:]],
               seeds, limits)
    assert sorted(got) == list(range(len(docs)))
    assert [got[i][0] for i in range(len(docs))] == ref  # tokens, text, finish reason, prompt tokens
    assert {o.finish_reason for o in ref} == {"eos", "length"}
    steps = [got[i][1] for i in range(12)]
    assert min(steps) < max(steps)  # the first bin's documents leave at different steps


@pytest.mark.parametrize("lag,refill", [(1, 0.0), (1, 0.6), (0, 0.6)])
def test_looking_a_round_late_and_refilling_in_groups_keep_the_tokens(tiny, lag, refill):
    """lag 1 (the CUDA mode, forced here): a round's flags are read while the next round runs, so a
    finished row runs one more round as a done row before its seat and slot are reused; refill:
    waiting documents join only once 3 of 5 seats are free. Neither changes a token."""
    docs = _docs(30, 3, 30, 500, seed=5)
    eng = _engine(tiny, max_new_tokens=10, check_every=2)
    eng.eos_ids = (_frequent_token(eng, docs),)
    limits = [(2, 10, 6)[i % 3] for i in range(len(docs))]
    seeds = list(range(len(docs)))
    eng.limits = lambda s: [limits[x] for x in s]
    ref = eng.generate(_stage(eng, docs), seeds)
    batcher = eng.batcher(seats=5, kv_rows=250, prefill_tokens=400, refill_fraction=refill, lag=lag)
    assert batcher.lag == lag and batcher.sched.refill_seats == max(1, round(refill * 5))
    got = _run(batcher, eng, [docs[:10], docs[10:20], docs[20:]], seeds, limits)
    assert [got[i][0] for i in range(len(docs))] == ref
    assert not batcher.busy and batcher.sched.slots.used == 0


def _prefills(batcher, eng, bins, seeds):
    """The first bin alone, the rest queued from the second step on (as the wanted work): per document
    its output, and the running count after each step that prefilled."""
    start = [0]
    for b in bins:
        start.append(start[-1] + len(b))
    got, nxt, after = {}, 0, []
    while nxt < len(bins) or batcher.busy:
        while nxt < len(bins) and (not batcher.busy or batcher.wants_work()):
            a, b = start[nxt], start[nxt + 1]
            batcher.add(_stage(eng, bins[nxt]), seeds[a:b], list(range(a, b)))
            nxt += 1
            if nxt == 1:
                break
        r = batcher.step()
        if r.prefill_tokens:
            after.append(batcher.sched.running)
        got.update({tag: gen for tag, gen, _ in r.done})
    return got, after


def test_a_backlog_merges_with_a_cohort_a_round_ahead_into_one_prefill_of_all_seats(tiny):
    """Two documents start alone, the next bin fills the other six seats a round later (lag 1, 2 steps a
    round): without the merge the two cohorts refill one after the other for the whole backlog (a prefill
    of 2 then one of 6, again and again); with it the cohort that leaves first waits the one round for the
    other, and every later prefill seats all 8. Greedy tokens are a bin at a time's."""
    docs = _docs(36, 3, 30, 500, seed=7)
    eng = _engine(tiny, max_new_tokens=6, check_every=2)
    eng.eos_ids = (-1,)  # no EOS: every document takes its 6 tokens, so the cohorts stay in step
    seeds = list(range(36))
    ref = eng.generate(_stage(eng, docs), seeds)
    bins = [docs[:2], docs[2:10], docs[10:18], docs[18:26], docs[26:34], docs[34:]]
    split = eng.batcher(seats=8, kv_rows=400, refill_fraction=0.25, lag=1)
    split.sched.merge_steps = 0
    got, after = _prefills(split, eng, bins, seeds)
    assert after == [2, 8, 2, 8, 2, 8, 2, 8, 2, 4] and [got[i] for i in range(36)] == ref
    merged = eng.batcher(seats=8, kv_rows=400, refill_fraction=0.25, lag=1)  # merge_steps: check_every
    got, after = _prefills(merged, eng, bins, seeds)
    assert after == [2, 8, 8, 8, 8, 4] and [got[i] for i in range(36)] == ref
    assert merged.sched.merge_steps == 2


@pytest.mark.parametrize("lag", [0, 1])
def test_stop_strings_end_a_document_as_in_a_bin(tiny, lag):
    docs = _docs(6, 10, 30, 500, seed=2)
    full = _engine(tiny, max_new_tokens=16).generate(_stage(_engine(tiny, max_new_tokens=16), docs))
    stop = full[0].text[4:7]
    eng = _engine(tiny, max_new_tokens=16, stop_strings=(stop,), check_every=1)
    ref = eng.generate(_stage(eng, docs))
    got = _run(eng.batcher(seats=3, kv_rows=200, lag=lag), eng, [docs[:3], docs[3:]], list(range(6)))
    assert [got[i][0] for i in range(6)] == ref and ref[0].finish_reason == "stop"


def test_the_kv_budget_bounds_what_runs_and_slots_never_overlap(tiny):
    docs = _docs(20, 5, 25, 500, seed=4)
    eng = _engine(tiny, max_new_tokens=8, check_every=2)
    b = eng.batcher(seats=16, kv_rows=120)
    b.add(_stage(eng, docs), list(range(20)), list(range(20)))
    seen = 0
    while b.busy:
        b.step()
        rows = sorted((e.start, e.start + e.rows) for e in b.entries if e.seat >= 0)  # still running
        assert all(x[1] <= y[0] for x, y in zip(rows, rows[1:])) and (not rows or rows[-1][1] <= 120)
        seen = max(seen, len(rows))
    assert 1 < seen < 16  # the 120 KV rows, not the 16 seats, bounded the batch


class _Tracked:
    def __init__(self, tiny, limits):
        self.tracker, self.registry, self.metrics, self.sink = OffsetTracker(), DocRegistry(), Metrics(), FakeSink()
        self.engine = _engine(tiny, max_new_tokens=10, check_every=1)
        self.engine.eos_ids = ()
        self.engine.limits = lambda seeds: [limits[i % len(limits)] for i in range(len(seeds))]

    def bins(self, sizes):
        out, o = [], 0
        for slot, n in enumerate(sizes):
            docs = [make_doc(self.tracker, offset=o + i) for i in range(n)]
            prompts = [[5 + (o + i) % 50, 7, 9 + i] for i in range(n)]
            sids = [registered(self.registry, d, [p])[0] for d, p in zip(docs, prompts)]
            out.append(bin_of(slot, sids, prompts))
            o += n
        return out


def test_the_gpu_thread_hands_each_document_to_finishing_when_it_is_decoded(tiny):
    w = _Tracked(tiny, limits=[2, 10])
    packer = FakePacker(w.bins([4, 4]))
    packer.config = PackerConfig(budget=200, reserve_per_seq=10, max_seqs=4)
    loop = gpu_stage(w.engine, packer, Shared(OffsetTracker(), w.registry, w.metrics), w.sink, batching="continuous")
    loop.start()
    deadline = time.monotonic() + 30
    while sum(len(p) for p, _ in w.sink.bins) < 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.stop()
    assert loop.join(10)
    assert loop.error is None and packer.released == [0, 1]
    handed = [[(s.doc.offset, len(r.token_ids)) for s, r in pairs] for pairs, _ in w.sink.bins]
    flat = [x for h in handed for x in h]
    assert sorted(o for o, _ in flat) == list(range(8))  # each document once
    assert all(n == (2 if o % 2 == 0 else 10) for o, n in flat)
    assert {o for o, _ in handed[0]} == {0, 2}  # the short ones of the first bin go first, alone
    assert all(n == 2 for _, n in flat[:4])  # every short one left before any long one
    get = w.metrics.registry.get_sample_value
    assert get("ribbon_bins_total") == 2 and get("ribbon_model_documents_total") == 8
    assert get("ribbon_gpu_busy_seconds_total") > 0


def test_a_failing_step_sends_its_documents_alone(tiny, monkeypatch):
    w = _Tracked(tiny, limits=[3])
    packer = FakePacker(w.bins([3]), config=PackerConfig(budget=200, reserve_per_seq=10, max_seqs=4))
    loop = gpu_stage(w.engine, packer, Shared(OffsetTracker(), w.registry, w.metrics), w.sink, batching="continuous")
    monkeypatch.setattr(loop.runner.model.batcher, "step", lambda: (_ for _ in ()).throw(RuntimeError("step failed")))
    loop.start()
    _until(lambda: len(w.sink.bins) == 1, "the documents, alone")
    loop.stop()
    assert loop.join(10)
    (pairs, _), = w.sink.bins
    assert sorted(s.doc.offset for s, _ in pairs) == [0, 1, 2] and not loop.runner.model.batcher.busy
    assert all(len(r.token_ids) == 3 for _, r in pairs)  # alone: the bin path, same per-document limits
    assert w.metrics.registry.get_sample_value("ribbon_model_errors_total") == 1


def test_a_prefill_that_fails_gives_back_every_document_it_had_seated(tiny, monkeypatch):
    """Documents admitted in the failing step hold seats but are not decode rows yet: abort() still
    returns them (with the running and waiting ones), and frees every seat and slot."""
    docs = _docs(9, 3, 20, 500, seed=8)
    eng = _engine(tiny, max_new_tokens=6, check_every=2)
    b = eng.batcher(seats=4, kv_rows=400, refill_fraction=0.0)
    b.sched.merge_steps = 0  # a freed seat is refilled at once (no wait for the cohort's end)
    b.add(_stage(eng, docs[:4]), list(range(4)), list(range(4)))
    b.step()  # four running
    b.add(_stage(eng, docs[4:]), list(range(4, 9)), list(range(4, 9)))
    while b.sched.running == 4:  # until seats free up and the next prefill would seat someone
        b.step()
    handed = set(range(9)) - {e.item.tag for e in b.entries if e.seat >= 0} - {e.item.tag for e in b.sched.waiting}
    monkeypatch.setattr("worker.engine.continuous.prefill_logits",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("prefill failed")))
    with pytest.raises(RuntimeError, match="prefill failed"):
        b.step()
    back = {tag for tag, _, _ in b.abort()}
    assert back | handed == set(range(9)) and not back & handed
    assert not b.busy and b.sched.slots.used == 0 and b.sched.running == 0


class _FakeContinuousRemote:
    """The engine process's seam in continuous mode: documents come back one per message, in the
    order `release` lets them (tests drive it by hand)."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.results: queue.Queue = queue.Queue()
        self.stats = {"oom_splits": 0}
        self._ids = iter(range(1, 10**6))

    def new_bin_id(self) -> int:
        return next(self._ids)

    def send_bin(self, tokens, cu, max_seqlen, seeds, live, bin_id: int | None = None) -> int:
        bin_id = self.new_bin_id() if bin_id is None else bin_id
        self.sent.append((bin_id, [int(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)], list(live)))
        return bin_id

    def release(self, bin_id: int, index: int) -> None:
        n = self.sent[bin_id - 1][1][index]
        self.results.put(("docs", [(bin_id, index, Generated(f"len {n}", [1] * n))], 1.0, 1.5, 0, 0, 0.25))

    def receive(self, timeout_s: float):
        try:
            return self.results.get(timeout=timeout_s)
        except queue.Empty:
            return None


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_the_proxy_hands_back_per_document_and_sends_as_seats_free(tiny):
    w = _Tracked(tiny, limits=[1])
    remote = _FakeContinuousRemote()
    packer = FakePacker(w.bins([2, 2, 2, 2]), config=PackerConfig(budget=1_000, reserve_per_seq=4, max_seqs=2))
    loop = gpu_stage(remote, packer, Shared(OffsetTracker(), w.registry, w.metrics), w.sink, batching="continuous",
                     where="process")
    looks = []  # each time the stage asks the model's room
    room = loop.runner.room
    loop.runner.room = lambda flight: (looks.append(1), room(flight))[1]
    loop.start()
    try:
        _until(lambda: len(remote.sent) == 2, "a bin for the free seats and one queued in a backlog")
        seen = len(looks)
        _until(lambda: len(looks) >= seen + 3, "the loop considers sending again")
        assert len(remote.sent) == 2  # 4 documents in flight = twice the seats: no more
        remote.release(1, 1)
        _until(lambda: len(w.sink.bins) == 1, "the first finished document reaches finishing alone")
        assert [s.doc.offset for s, _ in w.sink.bins[0][0]] == [1]
        _until(lambda: len(remote.sent) == 3, "a freed seat lets the next bin go")
        for bin_id, index in [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1)]:
            remote.release(bin_id, index)
        _until(lambda: len(remote.sent) == 4, "the last bin")
        remote.release(4, 1)
        remote.release(4, 0)
        _until(lambda: sum(len(p) for p, _ in w.sink.bins) == 8, "every document")
    finally:
        loop.stop()
        assert loop.join(5)
    assert loop.error is None and packer.released == [0, 1, 2, 3]
    assert [s.doc.offset for p, _ in w.sink.bins for s, _ in p] == [1, 0, 2, 3, 4, 5, 7, 6]
    get = w.metrics.registry.get_sample_value
    assert get("ribbon_bins_total") == 4 and get("ribbon_model_documents_total") == 8
    assert get("ribbon_gpu_busy_seconds_total") == pytest.approx(8 * 0.25)
    assert loop.busy_since is None and loop.flight.docs == 0 and loop.flight.bins() == 0


def test_continuous_batching_cuts_a_loop_as_a_bin_at_a_time_does(tiny):
    """The worker's engine cuts a looping document where the loop starts (loops.loop_start): the
    continuous batcher ends it at its look and hands back what a bin at a time gives."""
    import torch

    docs = _docs(6, 3, 30, 500, seed=3)
    eng = _engine(tiny, max_new_tokens=40, check_every=4, cut_loops=True)
    one = eng.tokenizer.convert_tokens_to_ids("1")
    with torch.no_grad():  # "1" the argmax everywhere: every document loops at once
        eng.lm_head.bias = torch.nn.Parameter(torch.zeros(eng.lm_head.out_features))
        eng.lm_head.bias[one] = 50.0
    ref = eng.generate(_stage(eng, docs), list(range(6)))
    got = _run(eng.batcher(seats=4, kv_rows=400), eng, [docs[:3], docs[3:]], list(range(6)))
    assert [got[i][0] for i in range(6)] == ref
    assert all(g.finish_reason == "loop" and len(g.token_ids) < 8 for g in ref)
