"""A tiny random Llama GGUF written with the gguf package's writer (the converter's test input)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from worker.engine.tiny import CHAT_TEMPLATE, _tokenizer

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 32, 2, 4, 2, 64


def write_tiny_llama_gguf(path: Path, seed: int = 0) -> Path:
    """A Llama of 2 layers with float32 weights and the tiny byte-level BPE tokenizer."""
    import gguf

    fast = _tokenizer(512)
    spec = json.loads(fast.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    specials = {a["content"]: a["id"] for a in spec["added_tokens"]}
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types([3 if t in specials else 1 for t in tokens])
    w.add_eos_token_id(specials["<|im_end|>"])
    w.add_bos_token_id(specials["<|endoftext|>"])
    w.add_pad_token_id(specials["<|pad|>"])
    w.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(seed)

    def t(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    t("token_embd.weight", n_vocab, HIDDEN)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    t("output.weight", n_vocab, HIDDEN)
    kv = KV_HEADS * HIDDEN // HEADS
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        t(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        t(f"blk.{i}.attn_k.weight", kv, HIDDEN)
        t(f"blk.{i}.attn_v.weight", kv, HIDDEN)
        t(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        t(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        t(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        t(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
