"""Engine: a loaded model plus the packed-bin generation path (DESIGN.md section 5).

One thread owns CUDA and calls stage()/generate(); nothing here is thread-safe.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from worker.engine.attention import REGISTERED, register_backends, want_prefill_kernel
from worker.engine.continuous import ContinuousBatcher
from worker.engine.decode import StepRunner, want_decode_blas, want_kv_layout, want_kv_write
from worker.engine.fp8 import quantize_layers
from worker.engine.fp8_attention import want_fp8_attention
from worker.engine.fuse import compile_layers, want_compile
from worker.engine.guards import GuardConfig, apply_guards
from worker.engine.kvcache import KVPool
from worker.engine.loop import BinResult, LoopConfig, run_bin, warm_decode
from worker.engine.merge import merge_projections, want_merge
from worker.engine.outputs import Generated, finish_rows, looks, stopped_rows
from worker.engine.prefill import no_mask_marker, prefill_logits

log = logging.getLogger(__name__)


_DOC = "\x00ribbon-document\x00"  # stands for the document while the chat template is rendered


@dataclass
class Staged:
    """A bin on the device. The caller may release the packer slot after wait_copied()."""

    tokens: torch.Tensor  # int32 [T_pad] on the device
    cu_host: list[int]  # [n+1]
    max_seqlen: int
    event: object | None = None  # torch.cuda.Event of the copy (None on CPU: copied at once)

    def wait_copied(self) -> None:
        if self.event is not None:
            self.event.synchronize()

    @property
    def num_docs(self) -> int:
        return len(self.cu_host) - 1


@dataclass
class EngineOptions:
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop_strings: tuple[str, ...] = ()
    instruction: str = "Summarize the following telemetry."
    use_chat_template: bool = True
    cuda_graphs: bool = True
    chunk_tokens: int = 32_768  # prefill activation bound (tokens per forward)
    check_every: int = 8  # decode steps between host looks at the done flags
    compile: str = "auto"  # "auto" | "on" | "off": torch.compile of the decoder layers (fuse.py)
    merge: str = "auto"  # "auto" | "on" | "off": q/k/v and gate/up as one GEMM each (merge.py)
    # "auto" | "triton" | "fa2" | "fa2_expanded" (measurement only: K/V heads repeated, the old torch 2.11 path)
    prefill_kernel: str = "auto"  # fused backends' prefill attention (attention.want_prefill_kernel)
    batching: str = "continuous"  # "continuous" (Engine.batcher) | "bin" (generate, a bin at a time): the worker's choice
    prefill_step_tokens: int = 131_072  # continuous batching: prompt tokens prefilled per scheduling step
    refill_fraction: float = 0.25  # continuous batching: share of the seats free before waiting documents join
    # Benchmarks only (random weights never stop by themselves): document stops after
    # stop_lengths[seed % len] tokens (capped at max_new_tokens). Empty: off.
    stop_lengths: tuple[int, ...] = ()
    quantization: str = "none"  # "none" | "fp8": FP8 prefill GEMMs (fp8.py; compute capability >= 8.9)
    fp8_min_rows: int = 1_024  # fp8: GEMMs of fewer rows (decode batches) keep bf16
    fp8_fast_accum: bool = True  # fp8: Hopper's fast FP8 accumulation (fp8.py; measured, docs/engine.md)
    fp8_attention: bool = False  # fp8: prefill attention in FP8 too (fp8_attention.want_fp8_attention)
    logits_hook: object = None  # per-step logits hook (decode.StepConfig.logits_hook): generation guards
    guards: GuardConfig = GuardConfig()  # per-document repetition / n-gram / minimum-length guards (guards.py)
    cut_loops: bool = False  # a document that loops ends there, its text cut where the loop starts (loops.loop_start)
    decode_blas: str = "auto"  # "auto" | "default" | "cublas" | "cublaslt": the decode step's GEMMs (decode.want_decode_blas)
    decode_kv_write: str = "auto"  # "auto" | "fused" | "separate": who stores decode K/V (decode.want_kv_write)
    kv_layout: str = "auto"  # "auto" | "token" | "head": the KV pool's storage order (decode.want_kv_layout)


class Engine:
    def __init__(self, model, tokenizer, backend: str, options: EngineOptions, name: str):
        register_backends()
        model.config._attn_implementation = REGISTERED[backend]
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.backend = backend
        self.options = options
        self.name = name
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.base = getattr(model, model.base_model_prefix)
        self.lm_head = model.get_output_embeddings()
        cfg = model.config
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eos_ids: tuple[int, ...] = _eos_ids(model, tokenizer)
        self._eos: tuple[tuple[int, ...], torch.Tensor] | None = None  # `eos`: (the ids it holds, the tensor)
        self.prefill_kernel = want_prefill_kernel(options.prefill_kernel, self.device, backend, self.head_dim,
                                                  self.dtype)
        self.pool = KVPool(cfg.num_hidden_layers, self.kv_heads, self.head_dim, self.dtype, self.device, options.max_new_tokens)
        self.pool.layout = want_kv_layout(options.kv_layout, self.device, backend)
        self.marker = no_mask_marker(self.device)
        graphs = options.cuda_graphs and self.device.type == "cuda"
        self.decode_blas = want_decode_blas(options.decode_blas, self.device)
        self.write_new = want_kv_write(options.decode_kv_write, backend)

        self.merged = want_merge(options.merge, self.device, backend)
        if self.merged:
            merge_projections(self.base)
        self.quantization = options.quantization
        if options.quantization == "fp8":  # before compile: the compiled layers fuse the activation quantization
            quantize_layers(self.base, self.device, options.fp8_min_rows, options.fp8_fast_accum)
        self.prefill_kernel = want_fp8_attention(options.fp8_attention, options.quantization, self.device,
                                                 self.prefill_kernel, self.head_dim)
        self.compiled = want_compile(options.compile, self.device, backend)
        if self.compiled:
            compile_layers(self.base)
        self.warmup_s: dict[str, float] = {}
        self._frame: tuple[list[int], list[int]] | None = None  # prompt ids around the document
        self.runner = StepRunner(self.base, self.lm_head, self.pool, graphs, self.marker)
        self.stats: dict[str, float] = {"oom_splits": 0, "bins": 0, "docs": 0, "prefill_s": 0.0, "decode_s": 0.0,
                                        "decode_steps": 0, "live_row_steps": 0, "generated_tokens": 0}
        self._copy_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        log.info("engine ready", extra={"model": name, "backend": backend, "device": str(self.device),
                                        "dtype": str(self.dtype), "cuda_graphs": graphs,
                                        "compiled_layers": self.compiled, "merged_projections": self.merged,
                                        "quantization": self.quantization,
                                        "prefill_kernel": self.prefill_kernel, "decode_blas": self.decode_blas,
                                        "decode_kv_write": "fused" if self.write_new else "separate",
                                        "kv_layout": self.pool.layout})

    # ---------------------------------------------------------------- prompts
    def prompt_ids(self, document: str) -> list[int]:
        """Instruction + document through the chat template when there is one, else a plain prompt."""
        return self.prompt_ids_batch([document])[0]

    def prompt_ids_batch(self, documents: list[str]) -> list[list[int]]:
        """prompt_ids for many documents in one tokenizer call (the fast tokenizer batches in Rust).

        Documents are untrusted: their text is tokenized with special-token parsing off, so a log line
        holding "<|im_end|>\n<|im_start|>system" stays text and can never close the user turn or open
        another role. Only the frame around it (the chat template's own markup) holds control tokens."""
        head, tail = self.prompt_frame()
        docs = self.tokenizer(list(documents), add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return [head + d + tail for d in docs]

    def prompt_frame(self) -> tuple[list[int], list[int]]:
        """The prompt's token ids before and after the document (computed once): the one owner of prompt
        framing. A prompt is head + the document's ids (tokenized as text) + tail; its length is
        len(head) + len(document ids) + len(tail)."""
        if self._frame is None:
            tok, instruction, rendered = self.tokenizer, self.options.instruction, None
            if self.options.use_chat_template and getattr(tok, "chat_template", None):
                rendered = tok.apply_chat_template([{"role": "user", "content": f"{instruction}\n\n{_DOC}"}],
                                                   add_generation_prompt=True, tokenize=False)
                if rendered.count(_DOC) != 1:
                    log.warning("the tokenizer's chat template does not keep the user message as given: "
                                "prompts go without it")
                    rendered = None
            if rendered is not None:
                before, after = rendered.split(_DOC)
                self._frame = (tok(before, add_special_tokens=False)["input_ids"],
                               tok(after, add_special_tokens=False)["input_ids"])
            else:  # the tokenizer's own specials (BOS) first, as add_special_tokens=True puts them
                specials = tok("", add_special_tokens=True)["input_ids"]
                self._frame = (specials + tok(f"{instruction}\n\n", add_special_tokens=False,
                                              split_special_tokens=True)["input_ids"],
                               tok("\nSummary:", add_special_tokens=False)["input_ids"])
        return self._frame

    @property
    def max_positions(self) -> int | None:
        """The model's positions (config.max_position_embeddings): a prompt and its summary fit in them."""
        n = getattr(self.model.config, "max_position_embeddings", None)
        return int(n) if n else None

    # ---------------------------------------------------------------- staging
    def stage(self, tokens: torch.Tensor, cu_seqlens, max_seqlen: int) -> Staged:
        """tokens: int32 [T_pad] (pinned for a real overlap); cu_seqlens: int32 [n+1] (host)."""
        cu_host = [int(c) for c in (cu_seqlens.tolist() if hasattr(cu_seqlens, "tolist") else cu_seqlens)]
        if self._copy_stream is None:
            return Staged(tokens.to(self.device).clone(), cu_host, int(max_seqlen))
        with torch.cuda.stream(self._copy_stream):
            dev = tokens.to(self.device, non_blocking=True)  # [T_pad] int32
            event = torch.cuda.Event()
            event.record(self._copy_stream)
        return Staged(dev, cu_host, int(max_seqlen), event)

    def _ready(self, staged: Staged) -> torch.Tensor:
        if staged.event is not None:
            torch.cuda.current_stream(self.device).wait_event(staged.event)
            staged.tokens.record_stream(torch.cuda.current_stream(self.device))
        return staged.tokens.long()  # [T_pad] int64

    # ---------------------------------------------------------------- compute
    @torch.inference_mode()
    def prefill_last_logits(self, staged: Staged) -> torch.Tensor:
        """float32 [n, V]: logits at each document's last position (no KV kept)."""
        tokens = self._ready(staged)
        return prefill_logits(self.base, self.lm_head, tokens, staged.cu_host, self.options.chunk_tokens, self.marker,
                              prefill_kernel=self.prefill_kernel)

    @torch.inference_mode()
    def generate(self, staged: Staged, seeds: list[int] | None = None) -> list[Generated]:
        """One Generated per document, in ribbon order. A CUDA OOM splits the bin and retries."""
        n = staged.num_docs
        if n == 0:
            return []
        if seeds is None:
            seeds = [self.options.seed + i for i in range(n)]
        if len(seeds) != n:
            raise ValueError(f"seeds has {len(seeds)} entries for {n} documents")
        tokens = self._ready(staged)
        return self._generate_split(tokens, staged.cu_host, list(seeds))

    def _generate_split(self, tokens: torch.Tensor, cu_host: list[int], seeds: list[int]) -> list[Generated]:
        try:
            return self._generate_once(tokens, cu_host, seeds)
        except torch.cuda.OutOfMemoryError:
            n = len(cu_host) - 1
            if n == 1:
                raise
            self.free()
            self.stats["oom_splits"] += 1
            log.warning("CUDA OOM: splitting the bin", extra={"docs": n, "tokens": cu_host[-1]})
            half = n // 2
            left = self._generate_split(tokens[: cu_host[half]], cu_host[: half + 1], seeds[:half])
            cu_right = [c - cu_host[half] for c in cu_host[half:]]
            right = self._generate_split(tokens[cu_host[half] : cu_host[-1]], cu_right, seeds[half:])
            return left + right

    @property
    def eos(self) -> torch.Tensor:
        """eos_ids as an int64 tensor [E] on the device: one tensor while eos_ids stays the same, since decode
        graphs captured at warm-up read it by address at every later replay (decode.StepRunner keeps the
        tensor a graph was captured with alive; a new tensor is made only when eos_ids changes)."""
        if self._eos is None or self._eos[0] != self.eos_ids:
            self._eos = (self.eos_ids, torch.tensor(sorted(self.eos_ids), dtype=torch.int64, device=self.device))
        return self._eos[1]

    def _loop_config(self, step_limit: int | None = None) -> LoopConfig:
        o = self.options
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count if self.device.type == "cuda" else 0
        return LoopConfig(o.max_new_tokens, o.temperature, o.top_p, self.eos, o.chunk_tokens, o.check_every, sms, self.kv_heads,
                          step_limit, self.prefill_kernel, o.logits_hook or self._guard_hook(), self.write_new,
                          self.decode_blas)

    def _guard_hook(self):
        """The decode step's logits hook for EngineOptions.guards (None when none is on); one per guards value and EOS ids,
        so a captured graph keyed by the hook stays valid."""
        g = self.options.guards
        if not g.active:
            return None
        cached = getattr(self, "_hook", None)
        if cached is None or cached[0] != (g, self.eos_ids):
            pool, eos = self.pool, self.eos

            def hook(logits: torch.Tensor, doc: torch.Tensor, ngen: torch.Tensor) -> torch.Tensor:
                history = pool.out_tokens.index_select(0, doc)  # [B, max_new]: each row's generated ids
                return apply_guards(logits, g, history, ngen, eos)  # [B, V]

            self._hook = ((g, self.eos_ids), hook)
        return self._hook[1]

    def limits(self, seeds: list[int]) -> list[int] | None:
        """Per-document token limits: the benchmark's stop lengths (EngineOptions.stop_lengths), else None."""
        lengths = self.options.stop_lengths
        if not lengths:
            return None
        return [max(1, min(int(lengths[s % len(lengths)]), self.options.max_new_tokens)) for s in seeds]

    def batcher(self, seats: int, kv_rows: int, prefill_tokens: int | None = None,
                refill_fraction: float | None = None, lag: int | None = None):
        """A ContinuousBatcher over this engine's KV pool and decode graphs (continuous.py): `seats`
        documents decoding at once at most, `kv_rows` KV rows in use at most (the token budget);
        waiting documents join once `refill_fraction` of the seats are free (or all of them fit)."""
        seats = max(1, seats)
        frac = self.options.refill_fraction if refill_fraction is None else refill_fraction
        return ContinuousBatcher(self, seats, max(1, kv_rows), prefill_tokens or self.options.prefill_step_tokens,
                                 max(1, round(frac * seats)), lag)

    def _generate_once(self, tokens: torch.Tensor, cu_host: list[int], seeds: list[int]) -> list[Generated]:
        stop_rows = self._stopped_rows if self._stops_on() else None
        res = run_bin(self.base, self.lm_head, self.runner, self.pool, tokens, cu_host, seeds,
                      self._loop_config(), self.marker, stop_rows, self.limits(seeds))
        self._account(res, len(seeds))
        lengths = [b - a for a, b in zip(cu_host[:-1], cu_host[1:])]
        counts = [len(t) for t in res.tokens]
        table = np.zeros((len(counts), max(counts, default=0)), dtype=np.int64)  # [n, longest]
        for i, t in enumerate(res.tokens):
            table[i, : len(t)] = t
        return self._finish_rows(table, counts, [i in res.stopped for i in range(len(counts))], lengths)

    @torch.inference_mode()
    def trial(self, tokens: torch.Tensor, cu_host: list[int], step_limit: int) -> BinResult:
        """Autotune probe: prefill + `step_limit` decode steps of a bin at full KV size (no OOM handling)."""
        seeds = list(range(len(cu_host) - 1))
        return run_bin(self.base, self.lm_head, self.runner, self.pool, tokens.to(self.device).long(), cu_host, seeds,
                       self._loop_config(step_limit), self.marker)

    @torch.inference_mode()
    def warm_up(self, budget: int, max_docs: int) -> dict[str, float]:
        """Costly set-up at start, not in the first live bins: the KV pool for a full bin (`budget`
        tokens of weight, `max_docs` documents), compiled layers for prefill and decode, and the
        decode CUDA graph of every bucket a bin of <= max_docs documents can use. Call it after
        autotune (which frees the pool). Returns seconds spent per part (also in self.warmup_s)."""
        t0 = time.perf_counter()
        self.pool.ensure(max(budget, 1), max(max_docs, 1))
        t1 = time.perf_counter()
        n = max(1, min(max_docs, budget // (self.options.max_new_tokens + 16), 64 if self.device.type == "cuda" else 1))
        cu = [16 * i for i in range(n + 1)]  # one small bin of 16-token documents: compiles prefill (dynamic T)
        tokens = torch.zeros(cu[-1], dtype=torch.int64, device=self.device)
        run_bin(self.base, self.lm_head, self.runner, self.pool, tokens, cu, list(range(n)),
                self._loop_config(step_limit=1), self.marker)
        t2 = time.perf_counter()
        buckets = warm_decode(self.runner, self._loop_config(), max_docs)  # CUDA: captures; CPU: states only
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t3 = time.perf_counter()
        self.warmup_s = {"kv_pool_s": t1 - t0, "prefill_s": t2 - t1, "decode_graphs_s": t3 - t2, "buckets": buckets,
                         "kv_rows": self.pool.rows, "docs": self.pool.docs}
        log.info("engine warmed up", extra=self.warmup_s)
        return self.warmup_s

    def free(self) -> None:
        """Drop the KV pool and captured graphs (autotune, OOM recovery)."""
        self.runner.clear()
        self.pool.release()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _account(self, res: BinResult, n: int) -> None:
        s = self.stats
        s["bins"] += 1
        s["docs"] += n
        s["prefill_s"] += res.prefill_s
        s["decode_s"] += res.decode_s
        s["decode_steps"] += res.decode_steps
        s["live_row_steps"] += res.live_row_steps
        s["generated_tokens"] += sum(len(t) for t in res.tokens)

    # ---------------------------------------------------------------- text
    def _stops_on(self) -> bool:
        return looks(self)

    def _stopped_rows(self, table: np.ndarray, counts) -> np.ndarray:
        """bool [m]: live rows of a host token table done by a stop string or a loop (outputs.py)."""
        return stopped_rows(self, table, counts)

    def _finish_rows(self, table: np.ndarray, counts, stopped: list[bool], prompt_tokens: list[int]) -> list[Generated]:
        """Finished rows of a host token table -> Generated, in row order (outputs.py)."""
        return finish_rows(self, table, counts, stopped, prompt_tokens)


def _eos_ids(model, tokenizer) -> tuple[int, ...]:
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config):
        e = getattr(src, "eos_token_id", None) if src is not None else None
        if isinstance(e, int):
            ids.add(e)
        elif isinstance(e, (list, tuple)):
            ids.update(int(x) for x in e)
    if tokenizer is not None and getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    return tuple(sorted(ids))
