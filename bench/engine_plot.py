"""PNG plots of an engine benchmark JSON (drawn where the JSON is, no GPU needed)."""

from __future__ import annotations

import json
from pathlib import Path


def plot(json_path: str, out_dir: str) -> list[str]:
    import matplotlib  # noqa: PLC0415 optional dependency (the [bench] extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 after matplotlib.use; the [bench] extra

    res = json.loads(Path(json_path).read_text())
    stem = Path(json_path).stem
    models = [k for k in res if isinstance(res[k], dict) and "figures" in res[k]]
    mixes = ("stress", "uniform")
    paths = []

    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, m in zip(axes[0], models):
        labels, vals = [], []
        for mix in mixes:
            for sysname, p in res[m].get(mix, {}).get("prefill", {}).items():
                if sysname not in ("hf_padded", "ribbon"):
                    continue
                labels.append(f"{mix}\n{sysname}")
                vals.append(p["tokens_per_s"] / 1e3)
        ax.bar(range(len(vals)), vals, color=["#999", "#2a7"] * (len(vals) // 2 + 1))
        ax.set_xticks(range(len(vals)), labels, fontsize=8)
        ax.set_ylabel("prefill, thousand real tokens/s")
        ax.set_title(f"Qwen2.5-{m} (random weights, bf16)")
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.1f}k", ha="center", va="bottom", fontsize=8)
    fig.suptitle(f"Packed prefill vs HF padded batches of 8 - {res.get('gpu', '')}")
    fig.tight_layout()
    p = Path(out_dir) / f"{stem}_prefill.png"
    fig.savefig(p, dpi=110)
    paths.append(str(p))
    plt.close(fig)

    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, m in zip(axes[0], models):
        labels, vals = [], []
        for mix in mixes:
            g = res[m].get(mix, {}).get("generate", {})
            for sysname in ("hf_generate_padded", "hf_generate_batch", "ribbon"):
                run = g.get(sysname, {})
                if run.get("output_tokens", 0) > 0 and not run.get("errors"):
                    labels.append(f"{mix}\n{sysname.replace('hf_generate_', 'hf ')}")
                    vals.append(g[sysname]["wall_s"])
        ax.bar(range(len(vals)), vals, color=["#999", "#bbb", "#2a7"] * (len(vals) // 3 + 1))
        floors = [res[m][mix]["generate"]["ribbon"]["job_floor_s"] for mix in mixes
                  if "job_floor_s" in res[m].get(mix, {}).get("generate", {}).get("ribbon", {})]
        if floors:  # the job's physical floor: prefill FLOPs at the matmul rate + decode at its memory floor
            ax.axhline(floors[0], color="#c33", ls="--", lw=1)
            ax.text(len(vals) - 0.5, floors[0], f"physical floor {floors[0]:.2f}s", color="#c33", ha="right",
                    va="bottom", fontsize=7)
        ax.set_xticks(range(len(vals)), labels, fontsize=7)
        ax.set_ylabel("wall time for the subset, s (lower is better)")
        ax.set_title(f"Qwen2.5-{m}: generate {res['args']['max_new']} tokens")
        for i, v in enumerate(vals):
            ax.text(i, v, f"{v:.1f}s", ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    p = Path(out_dir) / f"{stem}_generate.png"
    fig.savefig(p, dpi=110)
    paths.append(str(p))
    plt.close(fig)
    return paths
