"""The GPU thread: it alone owns CUDA and the model. The hot loop reads aloud:

    bin = packer.next_bin() → stage (H2D) → release the slot once copied → generate → finish documents

A bin that fails (not an OOM: the engine splits those itself) is retried one
document at a time; a document that fails alone goes to the dead-letter topic.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from worker import __version__
from worker.messages import BadMessage, dead_letter_headers, encode_output
from worker.ops.headers import dead_letter_headers_with_input, output_headers
from worker.service.docs import Doc, DocRegistry, Seq, mark_gpu_start
from worker.service.outputs import build_output
from worker.service.tracker import OffsetTracker, Record

log = logging.getLogger(__name__)


def _tensor(x):
    """Packer slots are numpy arrays on CPU, pinned torch tensors on CUDA; the engine takes tensors."""
    if isinstance(x, np.ndarray):
        import torch

        return torch.from_numpy(x)  # zero-copy view
    return x


class GpuLoop:
    def __init__(self, *, settings, engine, packer, registry: DocRegistry, tracker: OffsetTracker,
                 delivery, combine_q, metrics, budget: int):
        self.s, self.engine, self.packer = settings, engine, packer
        self.registry, self.tracker, self.delivery = registry, tracker, delivery
        self.combine_q, self.metrics, self.budget = combine_q, metrics, budget
        self.reserve = settings.packer.reserve_per_seq if settings.packer.reserve_per_seq is not None \
            else settings.model.max_new_tokens
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.busy_since: float | None = None
        self._oom_seen = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.metrics.gpu_heartbeat = time.monotonic()
                b = self.packer.next_bin(0.05)
                if b is not None:
                    self.run_bin(b)
        except BaseException as exc:  # noqa: BLE001 - reported to the app, which stops the worker
            self.error = exc
            log.exception("gpu thread failed")

    def run_bin(self, b) -> None:
        seqs = [self.registry.pop(int(sid)) for sid in b.seq_ids]
        t0 = time.monotonic()
        self.busy_since = t0
        try:
            staged = self.engine.stage(_tensor(b.tokens), _tensor(b.cu_seqlens), int(b.max_seqlen))
            staged.wait_copied()
        except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
            log.exception("staging a bin failed; its documents go alone")
            staged = None
        finally:
            self.packer.release(b.slot)
        mark_gpu_start([s.doc for s in seqs if s is not None], t0)
        self.metrics.bin_fill.observe((int(b.num_tokens) + self.reserve * len(seqs)) / self.budget)
        self.metrics.bins.inc()
        outs = self._generate(staged, seqs)
        gpu_s = time.monotonic() - t0
        self.busy_since = None
        self._count_oom_splits()
        self.metrics.gpu_seconds.inc(gpu_s)
        self.metrics.input_tokens.inc(int(b.num_tokens))
        share = gpu_s / max(1, len(seqs))
        for seq, out in zip(seqs, outs):
            if seq is None:
                continue  # its partition was revoked while it ran
            try:
                if isinstance(out, BaseException):
                    raise out
                self.metrics.output_tokens.inc(len(out.token_ids))
                if self.registry.finish(seq, out.text, len(out.token_ids), share):
                    self._round_done(seq)
            except Exception as exc:  # noqa: BLE001 - one document fails, the worker goes on
                self._dead_letter(seq.doc, exc)

    def _generate(self, staged, seqs: list[Seq | None]) -> list:
        """The bin's outputs; on a failure each document alone (a failure alone is its own result)."""
        if staged is not None:
            try:
                return self.engine.generate(staged, self._seeds(seqs))
            except Exception:  # noqa: BLE001 - routed: each document is retried alone, then dead-lettered
                self.metrics.model_errors.inc()
                log.exception("model failed on a bin of %d documents; retrying each alone", len(seqs))
        return [self._alone(s) for s in seqs]

    def _count_oom_splits(self) -> None:
        n = int(getattr(self.engine, "stats", {}).get("oom_splits", 0))
        if n > self._oom_seen:
            self.metrics.oom_splits.inc(n - self._oom_seen)
            self._oom_seen = n

    def _seeds(self, seqs: list[Seq | None]) -> list[int]:
        return [s.doc.seed(self.s.model.seed, s.index) if s is not None else 0 for s in seqs]

    def _alone(self, seq: Seq | None):
        if seq is None:
            return None
        tokens = seq.tokens  # [n] int32
        cu = np.array([0, len(tokens)], dtype=np.int32)  # [2] int32
        try:
            staged = self.engine.stage(_tensor(tokens), _tensor(cu), len(tokens))
            return self.engine.generate(staged, self._seeds([seq]))[0]
        except Exception as exc:  # noqa: BLE001 - this document goes to the dead-letter topic
            log.warning("document %s failed alone: %s", seq.doc.doc_id, exc)
            return exc

    def _round_done(self, seq: Seq) -> None:
        doc = seq.doc
        if not seq.final:
            self.combine_q.put(doc)  # the ingest thread plans the combine step (it owns the tokenizer)
            return
        now = time.monotonic()
        rec = Record(self.s.kafka.output_topic, doc.key if doc.key is not None else doc.doc_id.encode(),
                     encode_output(build_output(doc, doc.parts[0], settings=self.s,
                                                  model_name=self.engine.name, now=now)),
                     output_headers(doc.headers, doc.tp[0], doc.tp[1], doc.offset))
        if self.tracker.complete(doc.tp, doc.epoch, doc.offset, (rec,)):
            self.metrics.latency.observe(now - doc.received)
            self.delivery.wake()

    def _dead_letter(self, doc: Doc, exc: BaseException) -> None:
        err = BadMessage("model_error", f"{type(exc).__name__}: {exc}"[:500])
        headers = dead_letter_headers(err, topic=doc.tp[0], partition=doc.tp[1], offset=doc.offset,
                                      worker_version=__version__)
        rec = Record(self.s.kafka.dlq_topic, doc.key, doc.raw, dead_letter_headers_with_input(doc.headers, headers))
        if self.tracker.complete(doc.tp, doc.epoch, doc.offset, (rec,)):
            self.metrics.dead_lettered.labels("model_error").inc()
            self.delivery.wake()


