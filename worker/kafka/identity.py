"""Worker identity: the suffix of the transactional.id, without hand numbering.

`kafka.worker_slot` is an integer (as before) or one of these forms:

| form      | identity                                      | stable across restarts          | unique      |
|-----------|-----------------------------------------------|---------------------------------|-------------|
| integer   | the number given (hand numbering, as before)  | yes                             | if you say so |
| `auto`    | the short host name: a StatefulSet pod's `name-3`, a compose container's id, the machine's name | StatefulSet: yes; container: until recreated; host: yes | per host |
| `ordinal` | the StatefulSet ordinal only (`name-3` -> `3`); fails elsewhere | yes               | within the set |
| `random`  | 12 random hex digits, new at every process start | no                              | yes         |

Under `ribbon run --gpus`, every child adds `-gpuN` (its GPU index, passed in
RIBBON_GPU_INDEX by the supervisor), so the processes of one host never share
an identity.

Which form is safe where (docs/operating.md, "Worker identity"):
- Apache Kafka >= 2.5: any unique form. Zombie fencing goes through the group
  metadata sent with every transaction (KIP-447), and an abandoned transaction
  is aborted after `transaction.timeout.ms`; `random` is fine for Deployments.
- The embedded broker (Tansu) never times out a transaction: a worker that dies
  with one open must come back under the same id to abort it, so only a stable
  form (integer, `ordinal`, `auto` on a host or in a StatefulSet) is safe there.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import uuid
from collections.abc import Mapping

from worker.errors import RibbonError

GPU_INDEX_ENV = "RIBBON_GPU_INDEX"
_ORDINAL = re.compile(r"^.+-(\d+)$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class IdentityError(RibbonError, ValueError):
    pass


@functools.lru_cache(maxsize=1)
def _process_random() -> str:
    """One random id per process: every client of this worker (and its log line) agrees on it."""
    return uuid.uuid4().hex[:12]


def resolve_identity(slot: int | str, environ: Mapping[str, str] | None = None,
                     hostname: str | None = None) -> str:
    """The worker's identity for `slot` (see the table above), plus `-gpuN` under the supervisor."""
    env = os.environ if environ is None else environ
    host = hostname if hostname is not None else socket.gethostname()
    base = _base(slot, env, host)
    gpu = env.get(GPU_INDEX_ENV)
    return f"{base}-gpu{gpu}" if gpu not in (None, "") else base


def _base(slot: int | str, env: Mapping[str, str], host: str) -> str:
    if isinstance(slot, int):
        return str(slot)
    if slot == "random":
        return _process_random()
    short = host.split(".")[0]
    ordinal = _ORDINAL.match(short)
    if slot == "ordinal":
        if ordinal is None:
            raise IdentityError(f"host name {host!r} has no StatefulSet ordinal (NAME-N)")
        return ordinal.group(1)
    if not short:
        raise IdentityError("the host name is empty")
    return _SAFE.sub("_", short)
