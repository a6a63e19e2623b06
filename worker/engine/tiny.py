"""Tiny random causal LMs for tests and the demo, built offline and deterministically.

`make_tiny_checkpoint(path)` writes a Hugging Face checkpoint (config, safetensors weights,
generation config) and a byte-level BPE tokenizer trained on a small built-in telemetry corpus,
so the real loader can read it back. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoModelForCausalLM, GenerationConfig, LlamaConfig, MistralConfig, PreTrainedTokenizerFast,
                          Qwen2Config)

_CORPUS = (
    "2026-03-01T10:00:01Z gnb-017 oam ERROR S1 link down: SCTP association lost to mme-2",
    "2026-03-01T10:00:02Z amf-2 syslog WARN registration reject cause=congestion ue=imsi-001010000000001",
    "2026-03-01T10:00:03Z upf-1 pm throughput_dl=812.4Mbps throughput_ul=103.9Mbps drops=0",
    "2026-03-01T10:00:04Z gnb-003 trace RRC setup failure: timer T300 expired after 1000 ms",
    "2026-03-01T10:00:05Z smf-1 crash segfault in pfcp_session_modify at 0x7f3a2c1b; core dumped",
    "kernel: eth0 link is down; bonding: bond0: link status definitely down for interface eth0",
    "cell 42 PRB utilisation 97% for 15 min; handover failures rising; check neighbour relations",
    "Summarize the following telemetry for an on-call engineer. Name the failing element, the error and its likely cause.",
    "The failing element is gnb-017. The S1 link went down because the SCTP association to mme-2 was lost.",
    "summary: no errors; all counters nominal; latency p99 4.2 ms; packet loss 0.00%",
)

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer(vocab_size: int):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(_CORPUS) * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        bos_token=None,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(arch: str, vocab_size: int, eos_id: int, pad_id: int, **overrides):
    common = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    common.update(overrides)
    if arch == "qwen2":
        return Qwen2Config(rope_theta=10000.0, use_sliding_window=False, **common)
    if arch == "llama":
        return LlamaConfig(rope_theta=10000.0, attention_bias=False, mlp_bias=False, **common)
    if arch == "mistral":
        return MistralConfig(rope_theta=10000.0, sliding_window=None, **common)
    raise ValueError(f"arch must be 'qwen2', 'llama' or 'mistral', got {arch!r}")


def make_tiny_checkpoint(path: str | Path, arch: str = "qwen2", seed: int = 0, vocab_size: int = 512, **config_overrides) -> Path:
    """Write a tiny random causal LM (GQA: 4 heads / 2 kv heads) and its tokenizer to `path`.

    Deterministic for a given (arch, seed, vocab_size, overrides). Returns the folder.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(vocab_size)
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|pad|>")
    config = _config(arch, len(tokenizer), eos_id, pad_id, **config_overrides)
    gen = torch.Generator().manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            # std 0.3 (0.02 is the usual init) gives sharp, varied logits so greedy paths differ per prompt
            std = 0.3 if p.dim() > 1 else 0.05
            base = 1.0 if "norm" in name else 0.0
            p.copy_(base + std * torch.randn(p.shape, generator=gen))
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, do_sample=False)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
