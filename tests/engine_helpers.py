"""The tiny engine of the engine tests: loading with the guards and the loop cut off, random documents, staging a ribbon."""

from __future__ import annotations

import random

import torch

from worker.engine.loader import load_engine
from worker.config.settings import ModelRun


GUARDS_OFF = {"repetition_penalty": 1.0, "no_repeat_ngram": 0, "min_new_tokens": 0, "stop_strings": ()}


def _engine(path, **kw):
    max_new = kw.pop("max_new_tokens", 6)
    kw = {"cut_loops": False, **GUARDS_OFF, **kw}  # compared with HF greedy generate: no guards, no loop cut
    opts = {k: kw.pop(k) for k in list(kw) if k not in ModelRun.model_fields}  # EngineOptions no setting names
    return load_engine(ModelRun(path=str(path), max_new_tokens=max_new, **kw), **opts)


def _docs(n, lo, hi, vocab, seed=0):
    rng = random.Random(seed)
    return [[rng.randrange(4, vocab) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _stage(eng, docs):
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + len(d))
    pad = (-cu[-1]) % 16  # only the end of a ribbon may be padded
    ribbon = torch.tensor(sum(docs, []) + [0] * pad, dtype=torch.int32)  # [T_pad]
    return eng.stage(ribbon, torch.tensor(cu, dtype=torch.int32), max(len(d) for d in docs))


def _stage_unpadded(eng, docs):
    """The ribbon without end padding."""
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + len(d))
    return eng.stage(torch.tensor(sum(docs, []), dtype=torch.int32), torch.tensor(cu, dtype=torch.int32),
                     max(len(d) for d in docs))
