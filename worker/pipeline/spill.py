"""Dead-letter values wait on disk, not in memory, until their offset commits.

A dead letter is final the moment it is decided, yet it goes out in the transaction
that commits its offset, and that waits for every earlier offset of its partition: a
slow document can hold hundreds of large bad messages behind it for minutes. Values of
`threshold` bytes or more are appended to one unlinked temporary file (it vanishes
with the process, even after kill -9); memory keeps their position and length. The
file is truncated whenever nothing spilled is still waiting.

Why a file of our own: the bytes are needed exactly once more (when produced) and in
order of commit, never searched; a key-value store or mmap would add a dependency or
address space for nothing. Disk use is bounded like memory was: by backpressure's
message watermark times kafka.max_message_bytes, and in practice by what one slow
document holds back.
"""

from __future__ import annotations

import os
import tempfile
import threading
import weakref


class Spilled:
    """A value on disk; `read()` returns its bytes. The space is released when this object is dropped."""

    __slots__ = ("_spool", "pos", "size", "__weakref__")

    def __init__(self, spool: Spool, pos: int, size: int) -> None:
        self._spool, self.pos, self.size = spool, pos, size

    def read(self) -> bytes:
        return self._spool.read(self.pos, self.size)

    def __len__(self) -> int:
        return self.size


class Spool:
    """Thread-safe: the ingest thread holds values, the delivery thread reads and drops them."""

    def __init__(self, threshold: int, directory: str | None = None) -> None:
        self.threshold = threshold  # 0: never spill
        self._dir = directory
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._end = 0    # bytes written since the last truncation
        self._live = 0   # Spilled objects not yet dropped
        self.held_bytes = 0  # bytes of live values (a metric)

    def hold(self, value: bytes | None) -> bytes | Spilled | None:
        """`value` itself when small (or spilling is off), else a Spilled standing for it."""
        if value is None or not self.threshold or len(value) < self.threshold:
            return value
        with self._lock:
            if self._fd is None:
                fd, path = tempfile.mkstemp(prefix="ribbon-spill-", dir=self._dir)
                os.unlink(path)  # gone with the process, whatever ends it
                self._fd = fd
            pos = self._end
            os.pwrite(self._fd, value, pos)
            self._end += len(value)
            self._live += 1
            self.held_bytes += len(value)
        spilled = Spilled(self, pos, len(value))
        weakref.finalize(spilled, self._release, len(value))
        return spilled

    def read(self, pos: int, size: int) -> bytes:
        fd = self._fd
        if fd is None:
            raise ValueError("spool is closed")
        data = os.pread(fd, size, pos)
        if len(data) != size:
            raise OSError(f"spill file short read: {len(data)} of {size} bytes at {pos}")
        return data

    def _release(self, size: int) -> None:
        with self._lock:
            self._live -= 1
            self.held_bytes -= size
            if self._live == 0 and self._fd is not None:
                os.ftruncate(self._fd, 0)  # nothing waits: give the disk back
                self._end = 0

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
