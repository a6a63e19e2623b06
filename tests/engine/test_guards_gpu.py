"""Generation guards in the CUDA-graph decode (the H200): they act per document there too."""

from __future__ import annotations

import pytest
import torch

from guard_helpers import DOCS, _favour, _letters, _ngrams, _run
from worker.engine.guards import GuardConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device runs it: bash bench/device_run.sh gpu-tests)"),
    # an fp32 model compiled by inductor on Hopper: its advice to enable TF32 is not this test's concern
    # (TF32 would change the numbers the packed-vs-alone comparison relies on)
    pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning"),
]


def test_guards_in_the_cuda_graph_decode_act_per_document(tiny_model):
    """Graphs captured: the guarded packed bin equals each document alone, no trigram repeats, and no
    document ends before min_new_tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.engine.loader import engine_for_model

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).cuda()
    eng = engine_for_model(model, tok, attention="auto", max_new_tokens=24,
                           guards=GuardConfig(repetition_penalty=1.3, no_repeat_ngram=3, min_new_tokens=4))
    assert eng.runner.use_graphs
    _favour(eng, _letters(eng, 3), 50.0)
    packed = _run(eng, DOCS)
    alone = [_run(eng, [d])[0] for d in DOCS]
    assert [g.token_ids for g in packed] == [g.token_ids for g in alone]
    for g in packed:
        grams = _ngrams(g.token_ids, 3)
        assert len(set(grams)) == len(grams) and len(g.token_ids) >= 4
