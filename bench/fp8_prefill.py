"""FP8 prefill against bf16 on one GPU: Qwen2.5-7B architecture (random weights), the stress mix.

    python bench/fp8_prefill.py --out $OUT [--model 7b] [--chunk 65536] [--gen-docs 32] [--gen-tokens 64]

One engine (merged GEMMs, compiled layers, Triton prefill attention, as in production): bf16 prefill
tok/s and last-position logits over the whole mix, then the same layers given FP8 GEMMs
(worker/engine/fp8.py) and the same again. Accuracy: mean |logit difference| at each document's last
position (also over the mean |logit|), top-1 agreement there, and greedy agreement of `gen-docs`
documents over `gen-tokens` tokens (decode is bf16 in both; FP8 changes the prefill's KV and first
token). Writes fp8_prefill_<gpu>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from worker.bench.engine import MODELS, _ribbon_prefill, _stage, make_mix
from worker.engine.fp8 import quantize_layers
from worker.engine.loader import engine_for_model, random_model


def _logits(eng, docs, chunk: int):
    out = []
    for i in range(0, len(docs), 64):
        out.append(eng.prefill_last_logits(_stage(eng, docs, list(range(i, min(i + 64, len(docs)))))))
    torch.cuda.synchronize()
    return torch.cat(out)  # [n, V] float32


def _greedy(eng, docs):
    return [o.token_ids for o in eng.generate(_stage(eng, docs, list(range(len(docs)))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="7b", choices=["7b", "0.5b"])
    ap.add_argument("--chunk", type=int, default=65_536, help="prefill tokens per bin / forward")
    ap.add_argument("--gen-docs", type=int, default=32)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    dev = torch.device("cuda")
    model = random_model(MODELS[a.model], dev, torch.bfloat16)
    eng = engine_for_model(model, None, name=f"qwen2.5-{a.model}-random", max_new_tokens=a.gen_tokens,
                           chunk_tokens=a.chunk)
    eng.eos_ids = ()  # random weights: every document runs gen_tokens
    docs = make_mix("stress", model.config.vocab_size)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "model": f"qwen2.5-{a.model} (random weights)",
           "mix": "stress (400 documents: 60-175 and 2,420-2,660 tokens alternating)", "tokens": sum(map(len, docs)),
           "chunk_tokens": a.chunk, "compiled_layers": eng.compiled, "merged": eng.merged,
           "prefill_kernel": eng.prefill_kernel}
    out = Path(a.out) / f"fp8_prefill_{'h200' if 'H200' in res['gpu'] else 'gpu'}.json"

    def save():
        out.write_text(json.dumps(res, indent=1))

    runs = {}
    for name in ("bf16", "fp8"):
        if name == "fp8":
            t0 = time.perf_counter()
            res["fp8_gemms"] = quantize_layers(eng.base, dev)
            eng.free()  # decode graphs are recaptured around the new modules
            res["fp8_quantize_s"] = time.perf_counter() - t0
        best = _ribbon_prefill(eng, model, docs, a.chunk)  # after its own warm-up bin
        logits = _logits(eng, docs, a.chunk)
        gen = _greedy(eng, docs[: a.gen_docs])
        runs[name] = (logits, gen)
        res[name] = best
        print(f"{name}: prefill {best['tokens_per_s']:,.0f} tok/s ({best['wall_s']:.2f} s, {best['bins']} bins)",
              file=sys.stderr)
        save()
    (lb, gb), (lf, gf) = runs["bf16"], runs["fp8"]
    diff = (lb - lf).abs()
    agree = total = same = 0
    for x, y in zip(gb, gf):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        agree, total, same = agree + n, total + max(len(x), len(y), 1), same + (x == y)
    res["accuracy"] = {"mean_abs_logit_diff": diff.mean().item(), "mean_abs_logit_bf16": lb.abs().mean().item(),
                       "relative": (diff.mean() / lb.abs().mean()).item(), "max_abs_logit_diff": diff.max().item(),
                       "top1_agreement_last_position": (lb.argmax(-1) == lf.argmax(-1)).float().mean().item(),
                       "greedy_token_agreement": agree / total, "greedy_identical_docs": f"{same}/{len(gb)}",
                       "greedy_docs": len(gb), "greedy_tokens": a.gen_tokens}
    res["speedup"] = res["fp8"]["tokens_per_s"] / res["bf16"]["tokens_per_s"]
    save()
    print(json.dumps({k: res[k] for k in ("accuracy", "speedup")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
