"""The generation loop of one bin: packed prefill, then decode until every document is done.

Reads aloud: prefill -> first tokens -> (replay k steps -> look at done -> stop strings ->
compact) until done -> read the token table once.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import torch

from worker.engine.decode import (
    DecodeState,
    StepConfig,
    StepRunner,
    bucket_for,
    next_pow2,
)
from worker.engine.kvcache import KVPool, slot_starts
from worker.engine.prefill import prefill_logits
from worker.engine.sampling import choose_tokens


@dataclass
class LoopConfig:
    max_new: int
    temperature: float
    top_p: float
    eos: torch.Tensor  # int64 [E]
    chunk_tokens: int
    check_every: int
    num_sms: int  # 0 on CPU
    kv_heads: int
    step_limit: int | None = None  # autotune: stop decoding after this many steps
    prefill_kernel: str = "fa2"  # AttnContext.prefill_kernel (Engine resolves EngineOptions.prefill_kernel)
    logits_hook: object = None  # StepConfig.logits_hook (generation guards), also applied to the first token
    write_new: bool = False  # StepConfig.write_new (decode.want_kv_write)
    decode_blas: str | None = None  # StepConfig.blas (decode.want_decode_blas)


@dataclass
class BinResult:
    tokens: list[list[int]]  # generated ids per document (EOS included when hit)
    stopped: set[int]  # documents ended by a stop string
    prefill_s: float
    decode_s: float
    decode_steps: int
    live_row_steps: int  # sum over steps of live documents (for KV-floor figures)


def _splits(size: int, cfg: LoopConfig) -> int:
    if cfg.num_sms == 0:
        return 1
    want = max(1, -(-2 * cfg.num_sms // max(1, size * cfg.kv_heads)))  # ~2 programs per SM (H200 sweep)
    return min(16, next_pow2(want))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_bin(base, lm_head, runner: StepRunner, pool: KVPool, tokens: torch.Tensor, cu_host: list[int],
            seeds: list[int], cfg: LoopConfig, marker: torch.Tensor, stop_check=None,
            limits: list[int] | None = None) -> BinResult:
    """tokens: int64 [T] on device. stop_check(table, counts) -> bool [m] marks live rows of a host token
    table done (stop strings, a loop at the end: outputs.stopped_rows);
    limits[i] (<= cfg.max_new; default cfg.max_new) ends document i after that many tokens."""
    device = tokens.device
    n = len(cu_host) - 1
    lengths = [b - a for a, b in itertools.pairwise(cu_host)]
    starts = slot_starts(lengths, cfg.max_new)
    pool.ensure(starts[-1] + lengths[-1] + cfg.max_new, n)
    t0 = time.perf_counter()
    logits = prefill_logits(base, lm_head, tokens, cu_host, cfg.chunk_tokens, marker, pool, starts,
                            cfg.prefill_kernel)  # [n, V]
    seed_t = torch.tensor(seeds, dtype=torch.int64).to(device)  # [n]
    zero = torch.zeros(n, dtype=torch.int64, device=device)
    doc_ids = torch.arange(n, device=device)  # [n]
    first = first_tokens(logits, cfg, seed_t, doc_ids)  # [n]
    pool.out_tokens[:n, 0] = first
    pool.out_len[:n] = 1
    limit_t = torch.tensor(limits if limits is not None else [cfg.max_new] * n, dtype=torch.int64).to(device)  # [n]
    done = (limit_t <= 1) | torch.isin(first, cfg.eos)  # [n]
    rows = {"tok": first, "pos": torch.tensor(lengths, dtype=torch.int64).to(device), "doc": doc_ids,
            "start": torch.tensor(starts, dtype=torch.int64).to(device), "ngen": zero + 1, "seed": seed_t,
            "limit": limit_t, "done": done}
    _sync(device)
    t1 = time.perf_counter()
    steps, live_steps, stopped = _decode(runner, pool, rows, n, cfg, stop_check)
    _sync(device)
    t2 = time.perf_counter()
    counts = pool.out_len[:n].tolist()
    table = pool.out_tokens[:n].tolist()
    toks = [table[i][: counts[i]] for i in range(n)]
    return BinResult(toks, stopped, t1 - t0, t2 - t1, steps, live_steps)


def first_tokens(logits: torch.Tensor, cfg: LoopConfig, seeds: torch.Tensor, docs: torch.Tensor) -> torch.Tensor:
    """The token after the prompt. logits: float32 [n, V]; seeds, docs: int64 [n] -> int64 [n]."""
    zero = torch.zeros_like(seeds)  # [n]
    if cfg.logits_hook is not None:
        logits = cfg.logits_hook(logits, docs, zero)  # [n, V]
    return choose_tokens(logits, cfg.temperature, cfg.top_p, seeds, zero)


def _decode(runner: StepRunner, pool: KVPool, rows: dict, n: int, cfg: LoopConfig, stop_check):
    live_idx = [i for i, d in enumerate(rows["done"].tolist()) if not d]
    if not live_idx:
        return 0, 0, set()
    sel = torch.tensor(live_idx, dtype=torch.int64, device=rows["tok"].device)
    rows = {k: v.index_select(0, sel) for k, v in rows.items()}
    steps = live_steps = 0
    stopped: set[int] = set()
    size = bucket_for(len(live_idx))
    step_cfg = step_config(size, cfg)
    st, graph = runner.state(size, step_cfg)
    st.load(rows, pool)
    m = len(live_idx)
    on_cpu = st.tok.device.type == "cpu"
    while True:
        k = _steps_to_run(cfg, steps, on_cpu)
        for _ in range(k):
            runner.run(st, graph, step_cfg)
        steps += k
        live_steps += m * k
        done = st.done[:m].tolist()
        if stop_check is not None:
            apply_stops(st, pool, done, stop_check, stopped)
        live = [i for i, d in enumerate(done) if not d]
        if not live or (cfg.step_limit is not None and steps >= cfg.step_limit):
            return steps, live_steps, stopped
        new_size = bucket_for(len(live))
        if new_size < size:
            rows = st.take(torch.tensor(live, dtype=torch.int64, device=st.tok.device))
            size = new_size
            step_cfg = step_config(size, cfg)
            st, graph = runner.state(size, step_cfg)
            st.load(rows, pool)
            m = len(live)


def step_config(size: int, cfg: LoopConfig) -> StepConfig:
    return StepConfig(cfg.max_new, cfg.temperature, cfg.top_p, cfg.eos, _splits(size, cfg), cfg.logits_hook,
                      cfg.write_new, cfg.decode_blas)


def warm_decode(runner: StepRunner, cfg: LoopConfig, max_docs: int) -> int:
    """Capture the decode graph of every bucket up to bucket_for(max_docs) (rows parked: no KV
    is touched but the scratch row). Returns the number of buckets."""
    sizes = []
    size = 1
    while True:
        sizes.append(size)
        if size >= max_docs:
            break
        size = bucket_for(size + 1)
    for size in sizes:
        runner.state(size, step_config(size, cfg))
    return len(sizes)


def _steps_to_run(cfg: LoopConfig, steps: int, on_cpu: bool) -> int:
    """Steps before the next host look. On CPU (where every step is paid for, looks are free) no
    more than the max_new - 1 - steps that any live row can still take: a row has generated
    1 + steps tokens at least, so the rest would be steps over finished rows only."""
    if not on_cpu:
        return cfg.check_every
    return max(1, min(cfg.check_every, cfg.max_new - 1 - steps))


def apply_stops(st: DecodeState, pool: KVPool, done: list[bool], stop_check, stopped: set[int]) -> None:
    docs = st.doc[: len(done)].tolist()
    live_rows = [r for r, d in enumerate(done) if not d]
    if not live_rows:
        return
    live_docs = [docs[r] for r in live_rows]
    counts = pool.out_len.cpu().numpy()[live_docs]  # [m]
    table = pool.out_tokens.index_select(0, torch.tensor(live_docs, device=st.doc.device)).cpu().numpy()  # [m, W]
    for r, doc, hit in zip(live_rows, live_docs, stop_check(table, counts).tolist()):
        if hit:
            st.done[r] = True
            done[r] = True
            stopped.add(doc)
