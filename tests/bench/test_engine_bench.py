"""The engine benchmark packs with the product's packer (worker.packer.Packer, the C++ core), not a
first-fit of its own: every document lands in exactly one bin, whole and in its slot's ribbon,
and no bin's weight (tokens + reserve per document) passes the budget."""

from __future__ import annotations

import numpy as np
import pytest

from bench.engine import greedy_agreement, make_mix, product_bins


@pytest.mark.parametrize("budget,reserve,n", [(32_768, 0, 400), (16_384, 128, 60)])
def test_bench_bins_come_from_the_product_packer(budget, reserve, n):
    docs = make_mix("stress", 1_000, n=n)
    seen: list[int] = []
    weights = []
    for packer, b in product_bins(docs, budget, reserve, device="cpu"):
        ids = b.seq_ids.tolist()
        cu = np.asarray(b.cu_seqlens)
        for j, i in enumerate(ids):
            assert np.asarray(b.tokens[cu[j]:cu[j + 1]]).tolist() == docs[i]
        assert b.weight == sum(len(docs[i]) + reserve for i in ids) <= budget
        assert len(b.tokens) % 16 == 0 and b.num_tokens == cu[-1]
        weights.append(b.weight)
        seen += ids
        packer.release(b.slot)
    assert sorted(seen) == list(range(n))
    total = sum(len(d) + reserve for d in docs)
    assert len(weights) <= -(-total // budget) + 2  # close to the fewest bins the weights allow


def test_greedy_agreement_counts_tokens_up_to_the_first_difference():
    out = greedy_agreement([[1, 2, 3, 4], [5, 6], []], [[1, 2, 9, 4], [5, 6], []])
    # doc 1: 2 of 4 agree before the first difference; doc 2: 2 of 2; the empty pair counts 0 of 1
    assert out == {"greedy_token_agreement": 4 / 7, "greedy_identical_docs": "2/3"}
