"""Measure a real model's output lengths on the benchmark corpus: the stop-length distribution that
random-weight benchmarks use (model.stop_lengths_file), since random weights never stop by themselves.

    python -m bench.stop_lengths --gguf DIR/SmolLM2-135M-Instruct.Q4_1.gguf --documents 96 \
        --out bench/results/stop_lengths_cpu.json

Loads the model through transformers' GGUF reader (weights dequantized to fp32), saves it as a
Hugging Face checkpoint, then generates greedily through the product's engine (CPU, exact reference
attention) with the product's prompt (the chat template around each document of the `short`
corpus as the worker gives it to the model: digest compaction on) and `max_new_tokens` 128 (the
default). Writes the lengths (tokens up to and including the stop) and
the finish reasons.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench.e2e import model_texts
from worker.config.settings import ModelSettings, load_settings
from worker.demo.samples import corpus
from worker.engine.loader import load_engine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="a SmolLM2 GGUF file")
    ap.add_argument("--documents", type=int, default=96)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--bin", type=int, default=16, help="documents per generate call")
    ap.add_argument("--work", default="/tmp/ribbon-stop-lengths", help="where the converted checkpoint goes")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    gguf = Path(a.gguf)
    ckpt = Path(a.work)
    if not (ckpt / "config.json").exists():
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        model = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.float32)  # plain weights: saveable
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        model.save_pretrained(ckpt)
        tok.save_pretrained(ckpt)
    eng = load_engine(ModelSettings(path=str(ckpt), max_new_tokens=a.max_new_tokens, device="cpu"))
    docs = corpus(a.documents, seed=11)
    settings = load_settings(environ={}, overrides={"model.path": str(ckpt)})
    count = lambda xs: [len(x) for x in eng.tokenizer(list(xs), add_special_tokens=False)["input_ids"]]  # noqa: E731
    texts, _ = model_texts(settings, docs, count)  # what the worker gives the model (digest compaction)
    lengths, reasons, prompt_tokens = [], {}, []
    t0 = time.perf_counter()
    for i in range(0, len(docs), a.bin):
        prompts = eng.prompt_ids_batch(texts[i:i + a.bin])
        cu = [0]
        for p in prompts:
            cu.append(cu[-1] + len(p))
        staged = eng.stage(torch.tensor(sum(prompts, []), dtype=torch.int32), torch.tensor(cu, dtype=torch.int32),
                           max(len(p) for p in prompts))
        for o in eng.generate(staged):
            lengths.append(len(o.token_ids) + (o.finish_reason == "eos"))  # the EOS is a decode step too
            reasons[o.finish_reason] = reasons.get(o.finish_reason, 0) + 1
            prompt_tokens.append(o.prompt_tokens)
        print(f"{len(lengths)}/{len(docs)} documents, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    out = {"model": "SmolLM2-135M-Instruct (GGUF Q4_1, dequantized to fp32)", "corpus": "short (worker.demo.samples.corpus, seed 11), digest compaction on",
           "decoding": "greedy", "max_new_tokens": a.max_new_tokens, "documents": len(lengths), "lengths": lengths,
           "finish_reasons": reasons, "mean": statistics.mean(lengths), "median": statistics.median(lengths),
           "prompt_tokens_mean": statistics.mean(prompt_tokens), "seconds": time.perf_counter() - t0}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "lengths"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
