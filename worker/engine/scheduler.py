"""Continuous batching policy: which waiting documents join the running decode batch, and when.

Pure bookkeeping (no torch, no clock): seats (rows of the decode batch and of the token table), KV
rows (a SlotAllocator) and a FIFO of waiting documents. The batcher (continuous.py) asks it once per
scheduling step; tests drive it with a fake engine.

Policy, decode-first with a prefill token budget per step (as vLLM's chunked prefill):
- Every step first advances the running documents (a few decode steps); then at most
  `prefill_tokens` prompt tokens of waiting documents are prefilled and join the batch. A document
  longer than the budget is admitted alone, so one step's prefill is at most max(budget, longest
  prompt) tokens: the stall a running document sees between two tokens is bounded.
- With nothing decoding there is nothing to stall: every waiting document that fits is admitted.
- Refill in groups (`refill_seats`): while documents decode, waiting documents join only once at
  least min(refill_seats, waiting) seats are free. Documents that finish together then come back
  in one large packed prefill (efficient GEMMs, one forward) instead of a budget's worth per step;
  the wait is bounded, since every running document ends within max_new_tokens steps, and a short
  queue (steady load) is admitted as soon as it fits.
- Merge with a cohort about to end (`merge_steps`): while documents decode and the waiting ones do not
  all fit now (a backlog: they outnumber the free seats or the free KV rows), none joins while every
  running document ends within `merge_steps` decode steps (each one's token limit says the most it can
  still take). The seats those documents free then join the free ones in one admission: a backlog
  keeps cohorts of the full seats (one prefill each) instead of two cohorts a round apart that refill
  one after the other (two prefills per seats' worth of documents). While every running document
  ends within `merge_steps`, `wants_work` counts all seats as free, so the caller queues the next bin
  (if it has one) and the backlog forms. The wait is bounded by `merge_steps`; documents that all
  fit now (steady load, no bin behind them) are never held by it. 0 turns the rule off.
- Admission is first come, first served over documents in packer order (bins are taken whole from
  the packer, their documents queue in ribbon order): no document waits behind a later one. The
  head waits when it has no seat or no free KV interval; nothing is skipped past it.
- A document owns a seat and KV rows [start, start + prompt + max_new) from admission until it
  finishes; the KV in use never exceeds the pool's rows (the token budget), and slots never overlap.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from worker.engine.slots import SlotAllocator


@dataclass
class Entry:
    item: object  # the batcher's document
    length: int  # prompt tokens: prefill work
    rows: int  # KV rows it needs: prompt + reserve
    seat: int = -1  # assigned at admission
    start: int = -1  # first KV row, assigned at admission


class Scheduler:
    def __init__(self, seats: int, kv_rows: int, prefill_tokens: int, refill_seats: int = 1,
                 merge_steps: int = 0) -> None:
        if seats < 1 or prefill_tokens < 1 or refill_seats < 1:
            raise ValueError(f"seats ({seats}), prefill_tokens ({prefill_tokens}) and refill_seats ({refill_seats}) "
                             "must be >= 1")
        self.seats = seats
        self.refill_seats = min(refill_seats, seats)
        self.merge_steps = merge_steps
        self.slots = SlotAllocator(kv_rows)
        self.prefill_tokens = prefill_tokens
        self.waiting: deque[Entry] = deque()
        self._free_seats = list(range(seats - 1, -1, -1))  # a stack: low seats are reused first
        self.running = 0
        self.waiting_rows = 0

    def enqueue(self, entry: Entry) -> None:
        if entry.rows > self.slots.capacity:
            raise ValueError(f"a document needs {entry.rows} KV rows; the pool has {self.slots.capacity}")
        self.waiting.append(entry)
        self.waiting_rows += entry.rows

    def admit(self, decoding: int, ends_within: int | None = None) -> list[Entry]:
        """The waiting documents that join now, seats and KV rows assigned (in queue order).
        `ends_within`: decode steps within which every one of the `decoding` documents ends at most
        (None: unknown, no merge)."""
        out: list[Entry] = []
        if decoding and len(self._free_seats) < min(self.refill_seats, len(self.waiting)):
            return out  # refill in groups: wait for more seats (bounded: running documents end)
        if decoding and self.merge_steps and ends_within is not None and ends_within <= self.merge_steps \
                and self._backlog():
            return out  # merge: the running cohort ends within merge_steps; its seats join these
        tokens = 0
        while self.waiting and self._free_seats:
            head = self.waiting[0]
            if decoding and out and tokens + head.length > self.prefill_tokens:
                break
            start = self.slots.alloc(head.rows)
            if start is None:
                break
            self.waiting.popleft()
            self.waiting_rows -= head.rows
            head.seat, head.start = self._free_seats.pop(), start
            tokens += head.length
            out.append(head)
        self.running += len(out)
        return out

    def _backlog(self) -> bool:
        """Do the waiting documents outnumber what is free now (seats or KV rows)?"""
        return len(self.waiting) > len(self._free_seats) or self.waiting_rows > self.slots.free_rows

    def finish(self, entry: Entry) -> None:
        """A running document is done: its seat and KV rows are free again."""
        self.slots.free(entry.start, entry.rows)
        self._free_seats.append(entry.seat)
        self.running -= 1
        entry.seat = entry.start = -1

    def wants_work(self, ending: bool = False) -> bool:
        """Would more documents fit now than wait? (The caller then takes the next bin, if any.)
        `ending`: every running document ends within merge_steps, so all seats and KV rows count as
        free (the next bin waits to join the seats they free: see the merge rule)."""
        if ending and self.merge_steps:
            return len(self.waiting) < self.seats and self.waiting_rows < self.slots.capacity
        return len(self.waiting) < len(self._free_seats) and self.waiting_rows < self.slots.free_rows

    @property
    def busy(self) -> bool:
        return self.running > 0 or bool(self.waiting)
