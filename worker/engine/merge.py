"""Merged projections: q/k/v as one GEMM and gate/up as one GEMM, set up once at load.

Why: a decoder layer's q, k and v projections (and the MLP's gate and up projections) read the
same input. One GEMM over the concatenated weights reads that input once and, being wider, runs
nearer the matmul peak than three (two) narrow ones; GQA's K/V projections (512 columns of
3,584 on Qwen2.5-7B) are the least efficient GEMMs of a layer on their own. In decode, one GEMM
is one launch and one pass over the weights instead of three (two).

The model code stays transformers': each projection module is swapped for a `Part` of a
`Merged` group. The first part the model calls (q_proj, gate_proj: the order transformers'
Qwen2/Llama forward calls them) runs the merged GEMM and hands the other columns to the later
parts of the same call; a later part called with nothing handed over raises (a model whose forward
calls them otherwise must not be merged). Inside a compiled layer dynamo traces this hand-over
into the graph, so it costs nothing at run time.

`unmerge` puts the original modules back (benchmarks run Hugging Face baselines on the same model
object); their weights are views into the merged weight, so nothing is copied either way.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)

GROUPS = (("self_attn", ("q_proj", "k_proj", "v_proj")), ("mlp", ("gate_proj", "up_proj")))


class Merged(nn.Module):
    """One GEMM for several nn.Linear of the same input. Holds the merged weight (and bias)."""

    def __init__(self, linears: list[nn.Linear]):
        super().__init__()
        w = torch.cat([lin.weight.detach() for lin in linears], dim=0)  # [sum out, in]
        has_bias = [lin.bias is not None for lin in linears]
        b = None
        if any(has_bias):
            b = torch.cat([lin.bias.detach() if lin.bias is not None else w.new_zeros(lin.out_features)
                           for lin in linears])  # [sum out]
        self.weight = nn.Parameter(w, requires_grad=False)
        self.bias = nn.Parameter(b, requires_grad=False) if b is not None else None
        self.sizes = [lin.out_features for lin in linears]
        self.handed: list[torch.Tensor | None] = [None] * len(linears)
        self.originals = tuple(linears)  # a tuple: not registered, so parameters() lists each weight once
        self.gemm: nn.Module | None = None  # another GEMM of the same weights (fp8.py), else F.linear
        row = 0
        for lin, n, hb in zip(linears, self.sizes, has_bias):  # originals become views: no copy kept
            lin.weight = nn.Parameter(self.weight[row : row + n], requires_grad=False)
            if hb:
                lin.bias = nn.Parameter(self.bias[row : row + n], requires_grad=False)
            row += n

    def first(self, x: torch.Tensor) -> torch.Tensor:
        if self.gemm is not None:
            out = self.gemm(x)  # [..., sum out]
        else:
            out = nn.functional.linear(x, self.weight, self.bias)  # [..., sum out]
        parts = out.split(self.sizes, dim=-1)
        for i in range(1, len(parts)):
            self.handed[i] = parts[i]
        return parts[0]

    def take(self, i: int) -> torch.Tensor:
        out = self.handed[i]
        if out is None:
            raise RuntimeError(f"merged projection part {i} called before part 0 in the same forward: this model's "
                               f"forward calls its projections in another order; load it with merging off")
        self.handed[i] = None
        return out


class Part(nn.Module):
    """Stands in for one projection of a Merged group (no parameters of its own)."""

    def __init__(self, group: Merged, index: int):
        super().__init__()
        self.index = index
        self._group = (group,)  # not a submodule: the layer registers the group once, as `merged_<name>`

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = self._group[0]
        return group.first(x) if self.index == 0 else group.take(self.index)


def want_merge(requested: str, device: torch.device, backend: str) -> bool:
    """merge: auto -> on with a fused backend on CUDA (where it was measured), off elsewhere; on/off as asked."""
    if requested not in ("auto", "on", "off"):
        raise ValueError(f"merge={requested!r}: auto, on or off")
    if requested != "auto":
        return requested == "on"
    return device.type == "cuda" and backend != "reference"


def _key(names: tuple[str, ...]) -> str:
    return "merged_" + "_".join(n.split("_")[0] for n in names)  # merged_q_k_v, merged_gate_up


def _mergeable(parent: nn.Module, names: tuple[str, ...]) -> bool:
    mods = [getattr(parent, n, None) for n in names]
    return all(type(m) is nn.Linear for m in mods) and len({m.in_features for m in mods}) == 1


def merge_projections(base) -> int:
    """Merge q/k/v and gate/up in every decoder layer of `base` (in place); returns groups merged."""
    merged = 0
    for layer in getattr(base, "layers", []):
        for owner, names in GROUPS:
            parent = getattr(layer, owner, None)
            if parent is None:
                continue
            group = parent.__dict__.pop("_ribbon_unmerged", (None,))[0]  # merged before: no new copy
            if group is None:
                if not _mergeable(parent, names):
                    continue
                group = Merged([getattr(parent, n) for n in names])
            parent.add_module(_key(names), group)
            for i, n in enumerate(names):
                setattr(parent, n, Part(group, i))
            merged += 1
    log.info("projections merged", extra={"groups": merged})
    return merged


def unmerge_projections(base) -> None:
    """Put the original nn.Linear modules back (views into the merged weights; the group is kept
    aside so a later merge_projections reinstates it without copying)."""
    for layer in getattr(base, "layers", []):
        for owner, names in GROUPS:
            parent = getattr(layer, owner, None)
            group = getattr(parent, _key(names), None) if parent is not None else None
            if not isinstance(group, Merged):
                continue
            for n, lin in zip(names, group.originals):
                setattr(parent, n, lin)
            delattr(parent, _key(names))
            parent.__dict__["_ribbon_unmerged"] = (group,)  # merge_projections reuses it
