"""Decode: every unfinished document of a bin steps together, one token each per step.

The step is pure tensor work on fixed-size state (one row per document, padded to a bucket
size), so on CUDA it is captured once per bucket as a CUDA graph and replayed. The host looks at
the `done` flags only every `check_every` steps; when few enough documents remain, the live rows
are compacted into a smaller bucket (KV stays in place: rows address their own slots).

Two launch choices of the step (StepConfig, resolved by the engine from EngineOptions):
`write_new` lets the fused backends' decode kernel store each row's new K/V itself (two
index_copy_ launches fewer per layer), and `blas` names the BLAS library the step's GEMMs run
through while it is captured (or run eagerly): decode GEMMs of a few dozen rows read whole weight
matrices, and cuBLASLt's picks for them were faster on the H200 (docs/engine.md), while prefill
keeps the process's own choice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from worker.engine.attention import AttnContext
from worker.engine.errors import EngineSettingError
from worker.engine.kvcache import KVPool
from worker.engine.prefill import forward_hidden
from worker.engine.sampling import choose_tokens

log = logging.getLogger(__name__)

FIELDS = ("tok", "pos", "start", "doc", "ngen", "seed", "limit")


def bucket_for(n: int) -> int:
    """Smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... that holds n."""
    b = 1
    while True:
        if b >= n:
            return b
        if b >= 2 and b + b // 2 >= n:
            return b + b // 2
        b *= 2


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass
class StepConfig:
    max_new: int
    temperature: float
    top_p: float
    eos: torch.Tensor  # int64 [E] (may be empty)
    num_splits: int
    # Per-step logits hook (generation guards): hook(logits [B, V], doc [B], ngen [B]) -> logits [B, V], where
    # pool.out_tokens[doc, :ngen] are each row's generated ids so far. Pure tensor work (captured in the graph).
    logits_hook: Callable | None = None
    write_new: bool = False  # AttnContext.write_new: the decode kernel stores the step's K/V
    blas: str | None = None  # torch.backends.cuda.preferred_blas_library while the step runs (None: as set)


DECODE_BLAS = ("auto", "default", "cublas", "cublaslt")
KV_WRITES = ("auto", "fused", "separate")
KV_LAYOUTS = ("auto", "token", "head")


def want_kv_layout(requested: str, device: torch.device, backend: str) -> str:
    """EngineOptions.kv_layout (kvcache.KVPool.layout): auto -> "token" (rows of all heads together); "head"
    stores each head's rows as one contiguous run for the Triton decode kernel, chosen explicitly (the 7B
    decode step took the same 7.70 ms either way in engine-7b_h200.json: bench.engine --compare-decode-launch)."""
    if requested not in KV_LAYOUTS:
        raise EngineSettingError("kv_layout", f"{requested!r} is not one of {KV_LAYOUTS}", "auto")
    if requested != "auto":
        return requested
    return "token"


def want_decode_blas(requested: str, device: torch.device) -> str | None:
    """EngineOptions.decode_blas: cublas/cublaslt (CUDA only) as asked while the decode step is captured or run;
    auto -> cublaslt on CUDA (the graphs keep the kernels chosen at capture, and with cuBLASLt's the 7B decode
    step took 6.90 ms against cuBLAS's 7.11 in engine-7b_h200.json, docs/engine.md); default -> the process's
    setting; off CUDA None."""
    if requested not in DECODE_BLAS:
        raise EngineSettingError("decode_blas", f"{requested!r} is not one of {DECODE_BLAS}", "auto")
    if device.type != "cuda" or requested == "default":
        return None
    return "cublaslt" if requested == "auto" else requested


def want_kv_write(requested: str, backend: str) -> bool:
    """EngineOptions.decode_kv_write: fused -> the decode kernel stores the new K/V (fused backends; the
    reference backend always writes them itself); auto and separate -> index_copy_ then the kernel (fused is
    chosen explicitly: the 7B decode step took 7.70 ms with it against 6.90 without, cuBLASLt both ways, in
    engine-7b_h200.json)."""
    if requested not in KV_WRITES:
        raise EngineSettingError("decode_kv_write", f"{requested!r} is not one of {KV_WRITES}", "auto")
    return requested == "fused" and backend != "reference"


@contextlib.contextmanager
def blas_library(name: str | None):
    """torch.backends.cuda.preferred_blas_library(name) inside, the previous choice restored after."""
    if name is None:
        yield
        return
    saved = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(name)
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(saved)


class DecodeState:
    """Fixed-size per-row state: int64 [B] each, plus done: bool [B]. `limit` is the row's own
    token limit (<= max_new: a document's max_new_tokens, or a benchmark's stop length)."""

    def __init__(self, size: int, device: torch.device):
        self.size = size
        for name in FIELDS:
            setattr(self, name, torch.zeros(size, dtype=torch.int64, device=device))
        self.done = torch.ones(size, dtype=torch.bool, device=device)

    def park(self, pool: KVPool) -> None:
        """Every row becomes padding: done, writing the scratch row, recording into the dummy doc."""
        self.done.fill_(True)
        self.start.fill_(pool.scratch_row)
        self.pos.zero_()
        self.doc.fill_(pool.dummy_doc)
        self.ngen.zero_()
        self.tok.zero_()
        self.seed.zero_()
        self.limit.fill_(1)

    def load(self, rows: dict[str, torch.Tensor], pool: KVPool) -> None:
        """rows: field -> [m] tensors (m <= size), copied into the first m rows; the rest parked."""
        self.park(pool)
        m = rows["tok"].shape[0]
        for name in FIELDS:
            getattr(self, name)[:m].copy_(rows[name])
        self.done[:m].copy_(rows["done"])

    def take(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rows idx (int64 [m], on device) of every field."""
        out = {name: getattr(self, name).index_select(0, idx) for name in FIELDS}
        out["done"] = self.done.index_select(0, idx)
        return out


def decode_step(base, lm_head, st: DecodeState, pool: KVPool, cfg: StepConfig, marker: torch.Tensor) -> None:
    """Advance every live row by one token, in place. No host sync."""
    live = ~st.done  # [B]
    rows = st.start + st.pos  # [B] KV row of the token being fed
    ctx = AttnContext(
        mode="decode",
        k_cache=pool.k,
        v_cache=pool.v,
        rows=rows,
        kv_start=st.start.to(torch.int32),  # [B]
        kv_len=(st.pos + 1).to(torch.int32),  # [B]
        num_splits=cfg.num_splits,
        write_new=cfg.write_new,  # rows == kv_start + kv_len - 1 above, as the fused write needs
    )
    hidden = forward_hidden(base, st.tok, st.pos, ctx, marker)  # [B, hidden]
    logits = lm_head(hidden)  # [B, V]
    if cfg.logits_hook is not None:
        logits = cfg.logits_hook(logits, st.doc, st.ngen)  # [B, V]
    nxt = choose_tokens(logits, cfg.temperature, cfg.top_p, st.seed, st.ngen)  # [B]
    nxt = torch.where(live, nxt, st.tok)
    doc = torch.where(live, st.doc, torch.full_like(st.doc, pool.dummy_doc))  # [B]
    col = st.ngen.clamp(max=cfg.max_new - 1)  # [B]
    pool.out_tokens.index_put_((doc, col), nxt)
    st.ngen.add_(live.long())
    pool.out_len.index_put_((doc,), st.ngen)
    fin = st.ngen >= st.limit  # [B]
    if cfg.eos.numel():
        fin = fin | torch.isin(nxt, cfg.eos)
    st.pos.add_(live.long())
    st.tok.copy_(nxt)
    st.done.logical_or_(fin & live)


class StepRunner:
    """One DecodeState per bucket size, each with its CUDA graph (CUDA) or run eagerly."""

    def __init__(self, base, lm_head, pool: KVPool, use_graphs: bool, marker: torch.Tensor):
        self.base, self.lm_head, self.pool, self.marker = base, lm_head, pool, marker
        self.use_graphs = use_graphs
        # key -> (state, graph, the StepConfig it was captured with): a graph reads the tensors of that config
        # (cfg.eos) by address at every replay, so the entry keeps them alive; a later config with an equal key
        # has equal values, and replays the graph (reading the captured tensors, never the new ones)
        self._states: dict[tuple, tuple[DecodeState, object, StepConfig]] = {}
        self._gen = -1
        self.captures = 0
        self.capture_s = 0.0  # time spent capturing graphs (warm-up steps included)
        self._mempool = None  # one memory pool shared by every captured graph (they never run at once)

    def clear(self) -> None:
        self._states.clear()
        self._mempool = None

    def state(self, size: int, cfg: StepConfig) -> tuple[DecodeState, object]:
        if self._gen != self.pool.generation:  # buffers reallocated: old graphs point at freed memory
            self.clear()
            self._gen = self.pool.generation
        key = (size, cfg.num_splits, cfg.temperature, cfg.top_p, tuple(cfg.eos.tolist()), cfg.max_new,
               id(cfg.logits_hook), cfg.write_new, cfg.blas)
        if key not in self._states:
            st = DecodeState(size, self.pool.out_tokens.device)
            st.park(self.pool)
            graph = None
            if self.use_graphs:
                try:
                    graph = self._capture(st, cfg)
                except RuntimeError as exc:  # keep serving, eagerly, and say why
                    log.warning("CUDA graph capture failed (%s); decoding eagerly", str(exc)[:300])
                    self.use_graphs = False
                    st.park(self.pool)
            self._states[key] = (st, graph, cfg)
        st, graph, _ = self._states[key]
        return st, graph

    def _capture(self, st: DecodeState, cfg: StepConfig):
        t0 = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with blas_library(cfg.blas):  # the graph keeps the kernels chosen here
            with torch.cuda.stream(side):
                for _ in range(2):  # warm-up: kernel compilation, cuBLAS workspaces (rows are parked)
                    decode_step(self.base, self.lm_head, st, self.pool, cfg, self.marker)
            torch.cuda.current_stream().wait_stream(side)
            if self._mempool is None:
                self._mempool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._mempool):
                decode_step(self.base, self.lm_head, st, self.pool, cfg, self.marker)
        torch.cuda.synchronize()
        self.captures += 1
        self.capture_s += time.perf_counter() - t0
        return graph

    def run(self, st: DecodeState, graph, cfg: StepConfig) -> None:
        if graph is not None:
            graph.replay()
        else:
            with blas_library(cfg.blas):
                decode_step(self.base, self.lm_head, st, self.pool, cfg, self.marker)
