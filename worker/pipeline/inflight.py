"""Per-document state between ingest and delivery, keyed by packer sequence id.

A document becomes one or more sequences (chunks). Each finished sequence
comes back here; when a document's last sequence is done it becomes an output
record. Chunked documents go round once more: their chunk summaries are
planned again (by the ingest thread, which owns the tokenizer) as a combine
step. Thread-safe: ingest adds, the GPU thread finishes, rebalances cancel.
"""

from __future__ import annotations

import itertools
import threading
import zlib
from dataclasses import dataclass, field

from worker.digest.prepared import Prepared
from worker.pipeline.tracker import TopicPartition


@dataclass
class Doc:
    tp: TopicPartition
    epoch: int
    offset: int
    key: bytes | None
    doc_id: str
    text: str
    meta: dict                      # id/source/kind/attributes as given
    received: float                 # time.monotonic() at poll
    input_tokens: int = 0
    truncated: bool = False
    chunks: int = 1                 # sequences summarized in total (1 = not chunked)
    parts: dict[int, str] = field(default_factory=dict)
    expected: int = 0               # sequences of the current round still out
    output_tokens: int = 0
    gpu_s: float = 0.0
    first_gpu: float | None = None  # time.monotonic() at the start of its first bin
    packed: float | None = None     # ... when ingest handed it to the packer (first round)
    model_end: float | None = None  # ... at the end of its last bin so far
    rounds: int = 0                 # combine rounds done (chunked documents)
    raw: bytes | None = None        # the original value, for the dead-letter topic
    headers: tuple = ()             # the input record's headers: carried to the output (worker/kafka/headers.py)
    prepared: Prepared | None = None  # the digest pass (ingest, preprocess pool): digest, highlights, prompt
    document_tokens: int | None = 0  # tokens of the raw document (before compaction); None: not counted
    prefill_s: float | None = None  # its share of its bins' prefill and decode seconds (traces; None: unknown)
    decode_s: float | None = None
    window: object = None           # a closed window (worker/windowing/windows.py) when the document is one

    def take(self, prep: Prepared) -> None:
        """Its digest pass; the pass's redacted text (worker/redaction/) is its text from here on."""
        self.prepared = prep
        if prep.text is not None:
            self.text = prep.text

    def seed(self, base: int, index: int) -> int:
        """A reproducible seed per document (and chunk): reruns sample the same tokens."""
        return (zlib.crc32(self.doc_id.encode()) ^ (base * 2654435761) ^ (index * 40503)) & 0x7FFFFFFF


@dataclass
class Seq:
    doc: Doc
    index: int           # chunk index within the round (0 when whole)
    final: bool          # True: its text is the document's summary
    prompt_tokens: int
    tokens: object = None  # np.ndarray int32 [prompt_tokens], kept for a retry alone


class DocRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seqs: dict[int, Seq] = {}
        self._ids = itertools.count(1)

    def add(self, doc: Doc, prompts: list[tuple[int, ...]], final: bool) -> list[tuple[int, Seq, tuple[int, ...]]]:
        """Register a round of sequences for `doc`; returns (seq_id, seq, prompt) to submit."""
        out = []
        with self._lock:
            doc.expected = len(prompts)
            doc.parts = {}
            for i, p in enumerate(prompts):
                sid = next(self._ids)
                seq = Seq(doc, i, final, len(p))
                self._seqs[sid] = seq
                out.append((sid, seq, p))
        return out

    def pop(self, seq_id: int) -> Seq | None:
        with self._lock:
            return self._seqs.pop(seq_id, None)

    def finish(self, seq: Seq, text: str, output_tokens: int, gpu_s: float) -> bool:
        """Record one finished sequence; True when its round is complete."""
        doc = seq.doc
        with self._lock:
            doc.parts[seq.index] = text
            doc.output_tokens += output_tokens
            doc.gpu_s += gpu_s
            doc.expected -= 1
            return doc.expected == 0

    def drop_epochs(self, epochs: set[int]) -> int:
        """Forget every sequence of revoked partition epochs; returns how many."""
        with self._lock:
            gone = [sid for sid, s in self._seqs.items() if s.doc.epoch in epochs]
            for sid in gone:
                del self._seqs[sid]
            return len(gone)

    def __len__(self) -> int:
        with self._lock:
            return len(self._seqs)


def mark_bin(docs: list[Doc], start: float, end: float) -> None:
    """A bin that ran from `start` to `end` (time.monotonic()) held these documents."""
    for d in docs:
        if d.first_gpu is None:
            d.first_gpu = start
        d.model_end = end


def mark_phases(docs: list[Doc], prefill_s: float, decode_s: float) -> None:
    """Share one bin's prefill and decode seconds equally over its documents (for their traces)."""
    if not docs:
        return
    for d in docs:
        d.prefill_s = (d.prefill_s or 0.0) + prefill_s / len(docs)
        d.decode_s = (d.decode_s or 0.0) + decode_s / len(docs)
