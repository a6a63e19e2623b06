"""Continuous batching over packed prefill: documents leave the decode batch as they finish, and the
next documents' packed prefill takes their seats.

One scheduling step reads aloud:

    admit (scheduler.py: seats, KV rows, prefill budget, refill in groups, a backlog merged with a
    cohort that ends within a round) → packed prefill of the admitted documents into their KV slots
    → rebuild the decode rows (live rows kept, new rows appended, bucketed) → launch k decode steps
    (the bucket's CUDA graph) and an async copy of the done flags and the token table → read the
    flags of the round launched `lag` steps ago (its copy event) → hand its finished documents back,
    free their seats and slots

With `lag` 1 (CUDA) the host reads a round's flags while the next round runs, so the GPU does not
wait for the host's look, hand-back and admission; a finished row runs one more round as a done row
(it writes only its own slot, and any prefill into that slot is queued after that round on the same
stream). Stop strings are found on the same copy (a row whose text holds one is done, as at a
bin's look). With `lag` 0 (CPU) the host reads the round it just ran.

Rows of the decode state address their own KV slot and their own row of the token table (the
seat), so rows join and leave without moving any KV. A slot is freed only at the host look of a round
in which its row was done, and that row is dropped from the decode state at the same step's rebuild,
before the next round is launched. The KV pool is sized once (the token budget's rows, `max_docs`
seats) and never reallocated while documents run; decode graphs are the ones `Engine.warm_up`
captured (bucketed batch sizes).

Not thread-safe: the thread that owns CUDA calls add/step/abort.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import torch

from worker.engine.decode import FIELDS, bucket_for
from worker.engine.loop import first_tokens, step_config
from worker.engine.prefill import prefill_logits
from worker.engine.scheduler import Entry, Scheduler


@dataclass
class _Doc:
    tag: object  # the caller's handle, returned with the result
    tokens: torch.Tensor  # int64 [L] on the device (a view into its staged bin)
    seed: int
    limit: int  # tokens at most (<= max_new_tokens)
    steps: int = 0  # decode steps run since admission (host count)
    gpu_s: float = 0.0  # its share of the steps it ran in


@dataclass
class StepResult:
    done: list[tuple[object, object, float]]  # (tag, Generated, gpu seconds share) of documents that finished
    seconds: float  # wall time of the step
    prefill_tokens: int  # prompt tokens prefilled in it


@dataclass
class _Round:
    """k decode steps in flight: the rows they ran (host mirror) and their flags and tokens, copied."""
    entries: list[Entry]
    k: int
    done: torch.Tensor  # bool [m] (pinned on CUDA)
    out_len: torch.Tensor  # int64 [seats]
    out_tokens: torch.Tensor  # int64 [seats, max_new]
    event: object  # torch.cuda.Event, None on CPU


class ContinuousBatcher:
    def __init__(self, engine, seats: int, kv_rows: int, prefill_tokens: int, refill_seats: int = 1,
                 lag: int | None = None) -> None:
        self.e = engine
        self.cfg = engine._loop_config()
        engine.pool.ensure(kv_rows, seats)  # sized once: never reallocated under running documents
        # the token budget bounds KV in use; a backlog merges with a cohort that ends within a round
        self.sched = Scheduler(seats, kv_rows, prefill_tokens, refill_seats, merge_steps=self.cfg.check_every)
        self.entries: list[Entry] = []  # the decode state's rows, in row order (host mirror)
        self._keep: list[int] | None = None  # rows to keep at the next rebuild (None: nothing changed)
        self.st = self.graph = self.step_cfg = None
        self.on_cpu = engine.device.type == "cpu"
        self.lag = (0 if self.on_cpu else 1) if lag is None else lag
        self._pending: list[_Round] = []
        pin = not self.on_cpu
        self._bufs = [(torch.empty(bucket_for(seats), dtype=torch.bool, pin_memory=pin),
                       torch.empty(seats, dtype=torch.int64, pin_memory=pin),
                       torch.empty(seats, self.cfg.max_new, dtype=torch.int64, pin_memory=pin))
                      for _ in range(self.lag + 1)]
        self._rounds = 0
        self._joining: list[Entry] = []  # admitted this step, before they became decode rows

    # ---------------------------------------------------------------- the caller's side
    def add(self, staged, seeds: list[int], tags: list, limits: list[int] | None = None) -> None:
        """Queue a staged bin's documents (ribbon order). A document whose tag is None is skipped."""
        tokens = self.e._ready(staged)  # int64 [T_pad]
        cu = staged.cu_host
        reserve = self.cfg.max_new
        for i, (a, b) in enumerate(itertools.pairwise(cu)):
            if tags[i] is None:
                continue
            limit = self.cfg.max_new if limits is None else max(1, min(int(limits[i]), self.cfg.max_new))
            doc = _Doc(tags[i], tokens[a:b], int(seeds[i]), limit)
            self.sched.enqueue(Entry(doc, b - a, b - a + reserve))

    def wants_work(self) -> bool:
        ends = self._ends()
        return self.sched.wants_work(ending=ends is not None and ends <= self.sched.merge_steps)

    def _ends(self) -> int | None:
        """Decode steps within which every running document ends at most (its token limit); None: none runs."""
        live = self.entries if self._keep is None else [self.entries[i] for i in self._keep]
        return max((e.item.limit - 1 - e.item.steps for e in live), default=None)

    @property
    def busy(self) -> bool:
        return self.sched.busy

    @property
    def running(self) -> int:
        return self.sched.running

    def abort(self) -> list[tuple[object, int, int]]:
        """Drop every running and waiting document (after a failure); their (tag, seed, limit)."""
        if self.e.device.type == "cuda":
            torch.cuda.synchronize(self.e.device)  # nothing in flight writes a slot handed out later
        seated = [e for e in self.entries if e.seat >= 0] + [e for e in self._joining if e.seat >= 0
                                                              and all(e is not x for x in self.entries)]
        docs = [e.item for e in seated] + [e.item for e in self.sched.waiting]
        for e in seated:
            self.sched.finish(e)
        self.sched.waiting.clear()
        self.sched.waiting_rows = 0
        self.entries, self._keep, self.st, self._pending, self._joining = [], None, None, [], []
        return [(d.tag, d.seed, d.limit) for d in docs]

    # ---------------------------------------------------------------- one step
    @torch.inference_mode()
    def step(self) -> StepResult:
        t0 = time.perf_counter()
        decoding = len(self.entries) if self._keep is None else len(self._keep)
        admitted = self.sched.admit(decoding=decoding, ends_within=self._ends())
        self._joining = admitted  # seated, not yet rows: abort() must still return them if prefill fails
        new_rows = self._prefill(admitted) if admitted else None
        if admitted or self._keep is not None:
            self._rebuild(admitted, new_rows)
        self._joining = []
        rows = self._launch() if self.entries else 0
        done: list = []
        while len(self._pending) > self.lag or (self._pending and not rows):
            done += self._look(self._pending.pop(0))
        dt = time.perf_counter() - t0
        if rows:  # the step's time, shared by the rows it launched
            for e in self._pending[-1].entries if self._pending else self.entries:
                e.item.gpu_s += dt / rows
        out = [(doc.tag, gen, doc.gpu_s) for doc, gen in done]
        return StepResult(out, dt, sum(e.length for e in admitted))

    def _launch(self) -> int:
        """k decode steps of the current rows, then an async copy of their done flags and the token
        table (the round's event marks the copy done)."""
        k = self._steps_to_run()
        for _ in range(k):
            self.e.runner.run(self.st, self.graph, self.step_cfg)
        m = len(self.entries)
        for e in self.entries:
            e.item.steps += k
        self.e.stats["decode_steps"] += k
        self.e.stats["live_row_steps"] += m * k
        done, out_len, out_tokens = self._bufs[self._rounds % len(self._bufs)]
        self._rounds += 1
        pool = self.e.pool
        done[:m].copy_(self.st.done[:m], non_blocking=True)
        out_len.copy_(pool.out_len[: out_len.shape[0]], non_blocking=True)
        out_tokens.copy_(pool.out_tokens[: out_len.shape[0], : out_tokens.shape[1]], non_blocking=True)
        event = None
        if not self.on_cpu:
            event = torch.cuda.Event()
            event.record()
        self._pending.append(_Round(list(self.entries), k, done[:m], out_len, out_tokens, event))
        return m

    def _prefill(self, admitted: list[Entry]) -> dict[str, torch.Tensor]:
        """Packed prefill of the admitted documents into their slots; their decode rows."""
        e, cfg, dev = self.e, self.cfg, self.e.device
        docs = [a.item for a in admitted]
        tokens = torch.cat([d.tokens for d in docs])  # int64 [T]
        lengths = [a.length for a in admitted]
        cu = [0, *itertools.accumulate(lengths)]
        logits = prefill_logits(e.base, e.lm_head, tokens, cu, cfg.chunk_tokens, e.marker, e.pool,
                                [a.start for a in admitted], cfg.prefill_kernel)  # [n, V]
        seats = torch.tensor([a.seat for a in admitted], dtype=torch.int64).to(dev)  # [n]
        seeds = torch.tensor([d.seed for d in docs], dtype=torch.int64).to(dev)  # [n]
        limit = torch.tensor([d.limit for d in docs], dtype=torch.int64).to(dev)  # [n]
        first = first_tokens(logits, cfg, seeds, seats)  # [n]
        e.pool.out_tokens[seats, 0] = first
        e.pool.out_len[seats] = 1
        return {"tok": first, "pos": torch.tensor(lengths, dtype=torch.int64).to(dev), "doc": seats,
                "start": torch.tensor([a.start for a in admitted], dtype=torch.int64).to(dev),
                "ngen": torch.ones_like(first), "seed": seeds, "limit": limit,
                "done": (limit <= 1) | torch.isin(first, cfg.eos)}

    def _rebuild(self, admitted: list[Entry], new_rows: dict | None) -> None:
        """Decode rows = kept rows + admitted rows, loaded into the state of their bucket size."""
        keep = list(range(len(self.entries))) if self._keep is None else self._keep
        parts = []
        if keep and self.st is not None:
            parts.append(self.st.take(torch.tensor(keep, dtype=torch.int64, device=self.e.device)))
        if new_rows is not None:
            parts.append(new_rows)
        self.entries = [self.entries[i] for i in keep] + admitted
        self._keep = None
        if not self.entries:
            self.st = None
            return
        rows = {k: torch.cat([p[k] for p in parts]) for k in (*FIELDS, "done")}  # each [m]
        size = bucket_for(len(self.entries))
        self.step_cfg = step_config(size, self.cfg)
        self.st, self.graph = self.e.runner.state(size, self.step_cfg)
        self.st.load(rows, self.e.pool)

    def _steps_to_run(self) -> int:
        """check_every on CUDA; on CPU (where every step is paid for and looks are free) no more than
        the most any live row can still take."""
        if not self.on_cpu:
            return self.cfg.check_every
        most = max(e.item.limit - 1 - e.item.steps for e in self.entries)
        return max(1, min(self.cfg.check_every, most))

    def _look(self, rnd: _Round) -> list[tuple[_Doc, object]]:
        """A round's done flags (waiting for its copy); its finished documents leave (seats and slots
        freed) and the rows still running are kept at the next rebuild."""
        if rnd.event is not None:
            rnd.event.synchronize()
        done = rnd.done.tolist()
        stopped: set[int] = set()
        if self.e._stops_on():
            self._stops(rnd, done, stopped)
        fin = [rnd.entries[i] for i, d in enumerate(done) if d and rnd.entries[i].seat >= 0]
        if not fin:
            return []
        seats = [e.seat for e in fin]
        gens = self.e._finish_rows(rnd.out_tokens.numpy()[seats], rnd.out_len.numpy()[seats],
                                   [s in stopped for s in seats], [e.length for e in fin])
        out = []
        for entry, gen in zip(fin, gens):
            out.append((entry.item, gen))
            self.sched.finish(entry)
        self.e.stats["docs"] += len(out)
        self.e.stats["generated_tokens"] += sum(len(g.token_ids) for _, g in out)
        self._keep = [i for i, e in enumerate(self.entries) if e.seat >= 0]
        return out

    def _stops(self, rnd: _Round, done: list[bool], stopped: set[int]) -> None:
        """Stop strings and loops, on the round's copy of the token table: a live row whose text holds a
        stop string, or that ends in a loop, is done (as a bin's look marks it); one look over all live
        rows (outputs.stopped_rows). With lag 1 its row runs one more round on the device, writing only
        its own slot and seat before any prefill that reuses them; it leaves at this step's rebuild."""
        live = [i for i, d in enumerate(done) if not d and rnd.entries[i].seat >= 0]
        if not live:
            return
        seats = [rnd.entries[i].seat for i in live]
        hit = self.e._stopped_rows(rnd.out_tokens.numpy()[seats], rnd.out_len.numpy()[seats])  # [len(live)]
        for i, seat, h in zip(live, seats, hit.tolist()):
            if h:
                done[i] = True
                stopped.add(seat)
