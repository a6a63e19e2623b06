"""JSON logs (one object a line) or plain text, to stderr.

JSON lines carry every value of a message as a key of its own: the `extra=` fields a call gives, the
arguments of the messages named in `FIELDS` under those names, and any other message's arguments as
`args`. librdkafka's own lines (loggers `librdkafka.*`) that repeat within `RepeatFilter.window_s`
(e.g. one broker-down error per connection and thread at shutdown) are printed once, with how many
were held back on the next one that passes.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable

import orjson

from worker.kafka.identity import GPU_INDEX_ENV
from worker.redaction import scrub

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

# A message's format string -> the JSON key of each argument, in order.
FIELDS: dict[str, tuple[str, ...]] = {
    "token budget %d (reserve %d per document), attention backend %s": ("token_budget", "reserve",
                                                                         "attention_backend"),
    "worker identity: group %s, transactional.id %s": ("group", "transactional_id"),
    "assigned %s": ("partitions",),
    "revoked %s": ("partitions",),
    "lost %s: their uncommitted results are dropped": ("partitions",),
    "paused %d partitions (pending tokens %d, in flight %d)": ("paused", "pending_tokens", "inflight"),
    "resumed %d partitions": ("resumed",),
    "%d preprocess processes started (pipeline.preprocess_processes)": ("preprocess_processes",),
    "draining (up to %.0f s)": ("drain_timeout_s",),
    "stopping without committing more: %s": ("error",),
    "consume error: %s": ("error",),
    "offset commit failed (%s); those outputs may repeat": ("error",),
    "transaction aborted (%s); %d runs will be retried": ("error", "runs"),
    "%d records unacknowledged, %d failed (%s); retrying": ("unacknowledged", "failed", "error"),
    "a document of %d tokens failed alone: %s": ("tokens", "error"),
    "output of %s could not be built: %s": ("doc_id", "error"),
    "child gpu%d started pid %d": ("gpu", "pid"),
    "child gpu%d exited with code %d; restarting in %.0f s": ("gpu", "exit_code", "backoff_s"),
    "child gpu%d stopped with code %d": ("gpu", "exit_code"),
}


def _fields(record: logging.LogRecord) -> dict:
    args = record.args
    if not args or not isinstance(args, tuple):
        return {}
    names = FIELDS.get(record.msg) if isinstance(record.msg, str) else None
    if names is None or len(names) != len(args):
        return {"args": list(args)}
    return dict(zip(names, args))


def _jsonable(v):
    if isinstance(v, BaseException):
        return f"{type(v).__name__}: {v}"
    return str(v)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
               "level": record.levelname, "logger": record.name, "msg": record.getMessage(),
               "thread": record.threadName}
        out.update({k: v for k, v in _fields(record).items() if k not in out})
        out.update({k: v for k, v in vars(record).items() if k not in _STD})
        if record.exc_info:
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return orjson.dumps(out, default=_jsonable).decode()


class RepeatFilter(logging.Filter):
    """Holds back librdkafka lines that repeat (digits aside) within `window_s` of the first one printed."""

    def __init__(self, window_s: float = 30.0, prefix: str = "librdkafka",
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s, self.prefix, self.clock = window_s, prefix, clock
        self._seen: dict[tuple, list] = {}  # key -> [first printed at, held back since]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefix):
            return True
        key = (record.name, record.levelno, re.sub(r"\d+", "#", record.getMessage()))
        now = self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window_s:
            seen[1] += 1
            return False
        held = seen[1] if seen is not None else 0
        self._seen[key] = [now, 0]
        if len(self._seen) > 1024:  # old keys go: the filter never grows without bound
            for k in [k for k, v in self._seen.items() if now - v[0] >= self.window_s]:
                del self._seen[k]
        if held:
            record.msg = f"{record.getMessage()} ({held} more like it held back)"
            record.args = None
        return True


class Redact(logging.Filter):
    """The worker's own log lines carry no secret: each message (and exception text) is scrubbed by the
    installed redaction policy (worker/redaction/) before any formatter sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except (TypeError, ValueError):  # a bad format call: the handler reports it as it would without us
            return True
        clean = scrub(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = scrub(text)
        return True


class GpuTag(logging.Filter):
    """Under `ribbon run --gpus`, each child's lines name its GPU: a `gpu` key in JSON, `[gpuN]` in text
    (the children share the supervisor's stderr, so their lines interleave)."""

    def __init__(self, gpu: str) -> None:
        super().__init__()
        self.gpu = gpu

    def filter(self, record: logging.LogRecord) -> bool:
        record.gpu = self.gpu
        return True


def setup_logging(level: str, fmt: str, gpu: str | None = None) -> None:
    """gpu: this process's GPU index under the supervisor (default: RIBBON_GPU_INDEX, unset outside it)."""
    gpu = os.environ.get(GPU_INDEX_ENV) if gpu is None else gpu
    handler = logging.StreamHandler(sys.stderr)
    text = "%(asctime)s %(levelname)s " + ("[gpu%(gpu)s] " if gpu else "") + "%(name)s: %(message)s"
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(text))
    handler.addFilter(Redact())
    handler.addFilter(RepeatFilter())
    if gpu:
        handler.addFilter(GpuTag(gpu))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
