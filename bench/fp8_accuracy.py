"""FP8 prefill's accuracy on real weights: SmolLM2-135M-Instruct on the CPU, the FP8 GEMMs emulated
(the same quantized operands and scales as torch._scaled_mm; tests/engine/test_fp8.py checks the GPU path
against this emulation on the H200), and FP8 attention (model.fp8_attention) emulated in fp32 with the
Triton kernel's quantization (worker/engine/fp8_attention.py).

    python -m bench.fp8_accuracy --checkpoint ~/.cache/ribbon/models/smollm2-135m --documents 32 \
        --out bench/results/fp8_accuracy_cpu.json

The checkpoint is the folder `ribbon` converts `smollm2-135m` into (worker/engine/known.py; bench/stop_lengths.py
converts the same GGUF file). Prompts: the `short`
corpus as the worker gives it to the model (digest compaction on). Compares fp32 against FP8 prefill
(GEMMs of >= 64 rows in FP8: every prefill, no decode batch): mean |logit difference| at each
document's last position, top-1 agreement there, and greedy agreement over `max-new-tokens`; the same for
FP8 GEMMs with FP8 attention ("fp8_attention") and for FP8 attention alone, the GEMMs in fp32
("attention_only"), with each layer's attention error against fp32 attention on the same q/k/v
(bench/fp8_attention.py). `--no-attention`: the GEMMs only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from bench.e2e import model_texts
from bench.engine import greedy_agreement
from bench.fp8_attention import layer_errors, summary
from worker.config.settings import ModelRun, load_settings
from worker.demo.samples import corpus
from worker.engine.loader import load_engine


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--documents", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--no-attention", action="store_true", help="FP8 GEMMs only (no FP8 attention engines)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    t0 = time.perf_counter()
    ms = ModelRun(path=a.checkpoint, max_new_tokens=a.max_new_tokens, device="cpu")
    full = load_engine(ms)
    fp8 = load_engine(ms.model_copy(update={"quantization": "fp8"}), fp8_min_rows=64)
    settings = load_settings(environ={}, overrides={"model.path": a.checkpoint})
    count = lambda xs: [len(x) for x in full.tokenizer(list(xs), add_special_tokens=False)["input_ids"]]  # noqa: E731
    texts, _ = model_texts(settings, corpus(a.documents, seed=11), count)
    prompts = full.prompt_ids_batch(texts)
    cu = [0]
    for p in prompts:
        cu.append(cu[-1] + len(p))
    ribbon = torch.tensor(sum(prompts, []), dtype=torch.int32)
    cu_t = torch.tensor(cu, dtype=torch.int32)
    mx = max(map(len, prompts))
    la = full.prefill_last_logits(full.stage(ribbon, cu_t, mx))  # [n, V]
    lb = fp8.prefill_last_logits(fp8.stage(ribbon, cu_t, mx))
    ga = [o.token_ids for o in full.generate(full.stage(ribbon, cu_t, mx))]
    gb = [o.token_ids for o in fp8.generate(fp8.stage(ribbon, cu_t, mx))]
    diff = (la - lb).abs()
    out = {"model": "SmolLM2-135M-Instruct (GGUF Q4_1 dequantized; fp32 reference on the CPU)",
           "fp8": "emulated e4m3 GEMMs, per-channel weight and per-token activation scales, prefill only",
           "documents": len(prompts), "prompt_tokens": cu[-1], "max_new_tokens": a.max_new_tokens,
           "mean_abs_logit_diff": diff.mean().item(), "mean_abs_logit": la.abs().mean().item(),
           "relative": (diff.mean() / la.abs().mean()).item(),
           "top1_agreement_last_position": (la.argmax(-1) == lb.argmax(-1)).float().mean().item(),
           **greedy_agreement(ga, gb),
           "seconds": time.perf_counter() - t0, "command": "python -m bench.fp8_accuracy " + " ".join(argv or sys.argv[1:])}
    if not a.no_attention:  # FP8 attention on top of the FP8 GEMMs, and alone (GEMMs of >= 10**9 rows: none)
        attn = ms.model_copy(update={"quantization": "fp8", "fp8_attention": True})
        for name, min_rows in (("fp8_attention", 64), ("attention_only", 10**9)):
            eng = load_engine(attn, fp8_min_rows=min_rows)
            rows: list[dict] = []
            with layer_errors(rows):
                lc = eng.prefill_last_logits(eng.stage(ribbon, cu_t, mx))
            gc = [o.token_ids for o in eng.generate(eng.stage(ribbon, cu_t, mx))]
            d = (la - lc).abs()
            out[name] = {"prefill_kernel": eng.prefill_kernel, "mean_abs_logit_diff": d.mean().item(),
                         "relative": (d.mean() / la.abs().mean()).item(),
                         "top1_agreement_last_position": (la.argmax(-1) == lc.argmax(-1)).float().mean().item(),
                         **greedy_agreement(ga, gc), "attention_error": summary(rows), "attention_layers": rows}
        out["seconds"] = time.perf_counter() - t0
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
