"""The physical floors the engine benchmark measures against: the device's bf16 matmul rate and copy
bandwidth (measured in the run), a model's matmul parameters and the bytes a decode step reads."""

from __future__ import annotations

import time

import torch


def ceilings() -> dict:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    tflops = 10 * 2 * 8192**3 / (time.perf_counter() - t0) / 1e12
    src = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    torch.cuda.synchronize()
    bw = 10 * 2 * src.numel() / (time.perf_counter() - t0)  # bytes read + written per second
    del a, b, src, dst
    torch.cuda.empty_cache()
    return {"bf16_matmul_tflops": tflops, "copy_bytes_per_s": bw}


def model_figures(model) -> dict:
    """Matmul parameters per token and bytes a decode step must read (weights)."""
    base = getattr(model, model.base_model_prefix)
    layer_params = sum(p.numel() for n, p in base.layers.named_parameters() if p.dim() == 2)
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    untied = head.data_ptr() != emb.data_ptr()
    read = total - (emb.numel() * emb.element_size() if untied else 0)  # embedding: only B rows are read
    cfg = model.config
    return {"layer_matmul_params": layer_params, "weight_bytes_read_per_step": read, "layers": cfg.num_hidden_layers,
            "q_dim": cfg.num_attention_heads * (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads),
            "dtype": str(torch.bfloat16)}


def prefill_flops(fig: dict, lens: list[int]) -> float:
    attn = fig["layers"] * fig["q_dim"] * 2 * sum(n * n for n in lens)  # causal QK^T + PV
    return 2.0 * fig["layer_matmul_params"] * sum(lens) + attn


def job_floor_s(fig: dict, docs: list[list[int]], rate: float, decode_floor_s: float) -> float:
    """The physical floor of a generation job: its prefill FLOPs at the measured matmul rate
    (FLOP/s) plus its decode steps each at their memory floor (weights + live KV rows read once
    at the measured copy bandwidth; `decode_floor_s`, summed over the steps Ribbon ran)."""
    return prefill_flops(fig, [len(d) for d in docs]) / rate + decode_floor_s
