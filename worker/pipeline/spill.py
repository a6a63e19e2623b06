"""Dead-letter values wait on disk, not in memory, until their offset commits.

A dead letter is final the moment it is decided, yet it goes out in the transaction
that commits its offset, and that waits for every earlier offset of its partition: a
slow document can hold hundreds of large bad messages behind it for minutes. Values of
`threshold` bytes or more are appended to one unlinked temporary file (it vanishes
with the process, even after kill -9); memory keeps their position and length.

Space: the file never holds much more than what still waits. It is truncated whenever
nothing spilled waits; and when dropped values make up most of it (the file is larger
than twice the live bytes plus `slack` when the next value comes), the live values are
copied into a fresh file and the old one is closed. So the file only grows to at most
2 x waiting + slack, whatever order the commits come in, and each byte is copied about
once on average.

A full disk (or any error writing the file) never fails the caller: the value stays in
memory, as it would with spilling off, and spilling is retried after `retry_s`. Memory
is then bounded as it was before spilling existed: by backpressure's message watermark
times kafka.max_message_bytes.

Why a file of our own: the bytes are needed exactly once more (when produced) and in
order of commit, never searched; a key-value store or mmap would add a dependency or
address space for nothing.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import weakref

log = logging.getLogger(__name__)

MIN_SLACK = 1 << 20  # bytes of dropped values tolerated before compaction, at least
RETRY_S = 60.0


class Spilled:
    """A value on disk; `read()` returns its bytes. The space is released when this object is dropped."""

    __slots__ = ("_spool", "pos", "size", "__weakref__")

    def __init__(self, spool: Spool, pos: int, size: int) -> None:
        self._spool, self.pos, self.size = spool, pos, size

    def read(self) -> bytes:
        return self._spool.read(self)

    def __len__(self) -> int:
        return self.size


class Spool:
    """Thread-safe: the ingest thread holds values, the delivery thread reads and drops them."""

    def __init__(self, threshold: int, directory: str | None = None, slack: int | None = None,
                 retry_s: float = RETRY_S, clock=time.monotonic) -> None:
        self.threshold = threshold  # 0: never spill
        self.slack = max(MIN_SLACK, 4 * threshold) if slack is None else slack
        self._dir, self._retry_s, self._clock = directory, retry_s, clock
        self._lock = threading.RLock()  # a Spilled dropped by a thread inside the lock releases re-entrantly
        self._fd: int | None = None
        self._end = 0    # bytes written to the current file
        self._live: weakref.WeakSet[Spilled] = weakref.WeakSet()
        self.held_bytes = 0  # bytes of live values (a metric)
        self.failed_until = 0.0  # after a write error: values stay in memory until then

    def hold(self, value: bytes | None) -> bytes | Spilled | None:
        """`value` itself when small (or spilling is off, or the disk failed), else a Spilled standing for it."""
        if value is None or not self.threshold or len(value) < self.threshold:
            return value
        with self._lock:
            if self._clock() < self.failed_until:
                return value
            try:
                spilled = self._write(value)
            except OSError as exc:
                self.failed_until = self._clock() + self._retry_s
                log.warning("dead-letter spill file failed (%s): values wait in memory for %.0f s, then spilling "
                            "is tried again", exc.strerror or exc, self._retry_s)
                return value
        weakref.finalize(spilled, self._release, len(value))
        return spilled

    def _write(self, value: bytes) -> Spilled:
        if self._fd is None:
            self._fd = self._new_file()
        elif self._end > 2 * self.held_bytes + self.slack:
            self._compact()
        _write_all(self._fd, value, self._end)
        spilled = Spilled(self, self._end, len(value))
        self._end += len(value)
        self._live.add(spilled)
        self.held_bytes += len(value)
        return spilled

    def _new_file(self) -> int:
        fd, path = tempfile.mkstemp(prefix="ribbon-spill-", dir=self._dir)
        os.unlink(path)  # gone with the process, whatever ends it
        return fd

    def _compact(self) -> None:
        """Copy the live values into a fresh file and drop the old one (a failure leaves the old in use)."""
        live = sorted(self._live, key=lambda s: s.pos)  # strong references: none is dropped meanwhile
        fd = self._new_file()
        try:
            end = 0
            for s in live:
                _write_all(fd, os.pread(self._fd, s.size, s.pos), end)
                end += s.size
        except OSError:
            os.close(fd)
            raise
        pos = 0
        for s in live:
            s.pos, pos = pos, pos + s.size
        os.close(self._fd)
        self._fd, self._end = fd, end

    def read(self, spilled: Spilled) -> bytes:
        with self._lock:  # compaction moves values
            if self._fd is None:
                raise ValueError("spool is closed")
            data = os.pread(self._fd, spilled.size, spilled.pos)
        if len(data) != spilled.size:
            raise OSError(f"spill file short read: {len(data)} of {spilled.size} bytes at {spilled.pos}")
        return data

    def _release(self, size: int) -> None:
        with self._lock:
            self.held_bytes -= size
            if self.held_bytes == 0 and self._fd is not None:
                os.ftruncate(self._fd, 0)  # nothing waits: give the disk back
                self._end = 0

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _write_all(fd: int, data: bytes, pos: int) -> None:
    """pwrite every byte (a short write, as on a full disk, is an OSError)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, pos)
        if n <= 0:
            raise OSError(28, "No space left on device (short write)")
        view, pos = view[n:], pos + n
