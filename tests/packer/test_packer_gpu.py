"""The cuda ring: bins in pinned host tensors, copied to the GPU without a sync."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from worker.packer import Packer, PackerConfig  # noqa: E402 - after importorskip: no torch, no test module

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device runs it: bash bench/device_run.sh gpu-tests)"),
]


def test_cuda_ring_is_pinned_and_copies_unaltered_to_the_gpu():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 150_000, int(n), dtype=np.int32) for n in rng.integers(1, 3000, 400)]
    stream = torch.cuda.Stream()
    with Packer(PackerConfig(budget=16384, reserve_per_seq=128, max_seqs=64, efficient_tokens=1, max_wait_s=0.0,
                             slots=3, order="decreasing"), device="cuda") as p:
        assert all(t.is_pinned() for t in p._tokens) and all(c.is_pinned() for c in p._cu)
        for i, s in enumerate(seqs):
            p.submit(i, s, key=0)
        seen: dict[int, np.ndarray] = {}
        while len(seen) < len(seqs):
            b = p.next_bin(10.0)
            assert b is not None
            assert b.tokens.is_pinned() and b.tokens.data_ptr() == p._tokens[b.slot].data_ptr()
            with torch.cuda.stream(stream):
                tokens = b.tokens.to("cuda", non_blocking=True)  # int32 [T_padded]
                cu = b.cu_seqlens.to("cuda", non_blocking=True)  # int32 [n + 1]
                copied = torch.cuda.Event()
                copied.record(stream)
            copied.synchronize()  # the slot may be reused only after its copy
            p.release(b.slot)
            cu_host = cu.cpu().tolist()
            host = tokens.cpu().numpy()
            for j, sid in enumerate(b.seq_ids.tolist()):
                seen[sid] = host[cu_host[j] : cu_host[j + 1]]
        assert all(np.array_equal(seen[i], s) for i, s in enumerate(seqs))
