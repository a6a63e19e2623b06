"""`ribbon run --gpus` on one host: documents/s on 1 GPU and on N, and a kill -9 of one child.

    python -m bench.multigpu --arch-config config/models/qwen2.5-0.5b.json --gpus all --out $OUT/multigpu_h200x2.json
    python -m bench.multigpu --device cpu --gpus 0,1 --documents 200 --max-new-tokens 4   # CPU: fake GPU names

One embedded broker (Tansu, a process of its own) serves every run. Each run has topics of its own
(input of `--partitions`, output, dead letters) and starts `ribbon run --gpus <list>` (the supervisor,
one child per GPU, each child's model in a process of its own) as an operator would. Once every
child answers /readyz (model loaded, partitions assigned), `--documents` documents of the `short`
corpus (as the e2e stage of bench/device_run.sh) are produced at once; the run's figure is documents / (last summary
read (read_committed) - first produce), the median of `--repeats` such backlogs. Runs: the first GPU
alone, then all of `--gpus`. Each child's
/metrics is sampled every 0.2 s: its summaries, the time its model ran (GPU busy fraction over the
run) and the partitions it held (from its `assigned`/`revoked` log lines).

Kill (after the last run, same workers; with one GPU its only child): documents at `--kill-load` of the measured N-GPU
rate for `--kill-seconds`; a quarter in, the last child gets SIGKILL. Reported: every document
summarized (none lost), the supervisor's restart of that child (new pid, ready again), and the other
children's longest stretch without a new summary from the kill until the restarted child is ready or
the load's last summary is read, whichever is first (their pause: once everything is summarized, a
survivor idles until the restart, which is no pause). Scaling efficiency = N-GPU docs/s / (N x 1-GPU docs/s).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import orjson

from bench.results_io import machine_name, save
from bench.loadgen import OutputReader, OutputTopic, SteadyLoad, Topics
from bench.parts import random_checkpoint
from worker.cli.supervisor import parse_gpus
from worker.demo.samples import corpus
from worker.engine.tiny import make_tiny_checkpoint
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import plain_config

ROOT = Path(__file__).resolve().parents[1]
METRICS = {"summaries": "ribbon_produced_summaries_total", "busy_s": "ribbon_gpu_busy_seconds_total"}


def _get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def scrape(port: int) -> dict[str, float] | None:
    """The child's counters in METRICS, or None while it does not answer (dead or starting)."""
    status, text = _get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return None
    out = {}
    for key, name in METRICS.items():
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        out[key] = float(m.group(1)) if m else 0.0
    return out


class Sampler(threading.Thread):
    """Every `every_s`: (time, counters or None, ready) per child port."""

    def __init__(self, ports: list[int], every_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.ports, self.every_s, self.halt = ports, every_s, threading.Event()
        self.series: dict[int, list[tuple[float, dict | None, bool]]] = {p: [] for p in ports}

    def run(self) -> None:
        while not self.halt.is_set():
            for p in self.ports:
                t = time.monotonic()
                self.series[p].append((t, scrape(p), _get(f"http://127.0.0.1:{p}/readyz", 1.0)[0] == 200))
            self.halt.wait(self.every_s)

    def at(self, port: int, t: float) -> dict | None:
        """The last answered sample of `port` at or before `t` (the first one after, if none before)."""
        answered = [(ts, c) for ts, c, _ in self.series[port] if c is not None]
        before = [c for ts, c in answered if ts <= t]
        return before[-1] if before else (answered[0][1] if answered else None)


def survivor_pause(points: list[tuple[float, float]], t_kill: float, t_back: float, t_last: float) -> float:
    """A surviving child's longest stretch without a new summary while the load had summaries to come: from
    the kill until the killed child is ready again (`t_back`) or the load's last summary was read
    (`t_last`), whichever is first; after that a survivor has nothing to publish, and its idle wait for
    the restart is no pause. `points`: its (time, summaries so far) samples."""
    end = min(t_back, t_last)
    points = [(t, n) for t, n in points if t_kill - 1.0 <= t <= end]
    rises = [t for (t, n), (_, prev) in zip(points[1:], points[:-1]) if n > prev]
    edges = [t_kill, *(t for t in rises if t > t_kill), end]
    return max(b - a for a, b in zip(edges[:-1], edges[1:]))


def children_of(pid: int) -> dict[int, int]:
    """{gpu index: pid} of the supervisor's children (their RIBBON_GPU_INDEX)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            gpu = next((e.split(b"=", 1)[1] for e in env if e.startswith(b"RIBBON_GPU_INDEX=")), None)
            if gpu is not None:
                out[int(gpu)] = int(child)
    return out


def partitions_held(log: Path, since: int) -> dict[str, list[int]]:
    """Each child's partitions at the end of the log (from `since`), from its JSON `assigned`/`revoked` lines."""
    held: dict[str, set[int]] = {}
    with open(log, "rb") as fh:
        fh.seek(since)
        for line in fh:
            if not line.startswith(b"{"):
                continue
            rec = orjson.loads(line)
            if rec.get("msg", "").startswith("child gpu") and " started pid " in rec["msg"]:
                held.pop(str(rec.get("gpu")), None)  # a (re)started child holds nothing yet
                continue
            if rec.get("gpu") is None or rec.get("msg", "").split(" ")[0] not in ("assigned", "revoked", "lost"):
                continue
            parts = {p for _, p in rec.get("partitions", [])}
            mine = held.setdefault(str(rec["gpu"]), set())
            mine |= parts if rec["msg"].startswith("assigned") else set()
            mine -= parts if not rec["msg"].startswith("assigned") else set()
    return {f"gpu{g}": sorted(p) for g, p in sorted(held.items())}


class Run:
    """One `ribbon run --gpus` supervisor over fresh topics; its children serve on ports from a.base_port."""

    def __init__(self, a, broker, model: str, gpus: list[int], label: str, log: Path) -> None:
        base_port = a.base_port
        self.gpus, self.label, self.log = gpus, label, log
        self.topics = Topics(broker.bootstrap, f"in-{label}", f"out-{label}", a.partitions)
        broker.create_topics({self.topics.input: a.partitions, self.topics.output: a.partitions, f"dlq-{label}": 1})
        self.ports = [base_port + i for i in range(len(gpus))]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIBBON_")}
        env.update({"RIBBON_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap, "RIBBON_KAFKA__INPUT_TOPICS": self.topics.input,
                    "RIBBON_KAFKA__OUTPUT_TOPIC": self.topics.output, "RIBBON_KAFKA__DLQ_TOPIC": f"dlq-{label}",
                    "RIBBON_KAFKA__GROUP_ID": f"ribbon-{label}", "RIBBON_KAFKA__WORKER_SLOT": "0",
                    "RIBBON_KAFKA__SESSION_TIMEOUT_MS": str(a.session_timeout_ms),
                    "RIBBON_MODEL__PATH": model, "RIBBON_MODEL__MAX_NEW_TOKENS": str(a.max_new_tokens),
                    "RIBBON_PACKER__TOKEN_BUDGET": str(a.token_budget), "RIBBON_SERVER__PORT": str(base_port),
                    "RIBBON_LOG_FORMAT": "json", "RIBBON_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"})
        env.update(kv.split("=", 1) for kv in a.env)
        self.since = log.stat().st_size if log.exists() else 0
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "worker", "run", "--gpus", ",".join(map(str, gpus)), "--device", a.device]
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.sampler = Sampler(self.ports)
        self.sampler.start()

    def wait_ready(self, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the supervisor exited ({self.proc.returncode}); see {self.log}")
            if all(_get(f"http://127.0.0.1:{p}/readyz", 1.0)[0] == 200 for p in self.ports):
                return time.monotonic() - self.t_start
            time.sleep(0.2)
        raise RuntimeError(f"the children were not ready within {timeout_s:.0f} s; see {self.log}")

    def backlog(self, docs: list[dict], timeout_s: float) -> dict:
        """Produce `docs` at once; docs/s until the last summary is read (of these docs: ids are `<prefix>-i`)."""
        prefix = docs[0]["id"].rsplit("-", 1)[0] + "-"
        reader = OutputReader(OutputTopic(self.topics.bootstrap, self.topics.output, self.topics.partitions),
                              len(docs), timeout_s, prefix=prefix)
        prod = clients.producer(plain_config(self.topics.bootstrap).tool_producer())
        t0 = time.monotonic()
        for d in docs:
            prod.produce(self.topics.input, value=orjson.dumps(d), key=d["id"].encode())
            prod.poll(0)
        prod.flush(60)
        t_produced = time.monotonic()
        read = reader.result()
        t1 = max((v[0] for v in read.values()), default=time.monotonic())
        time.sleep(0.5)  # one more sample past the last summary
        wall = t1 - t0
        children = {}
        for gpu, port in zip(self.gpus, self.ports):
            a, b = self.sampler.at(port, t0), self.sampler.at(port, t1 + 0.4)
            if a is None or b is None:
                children[f"gpu{gpu}"] = None
                continue
            children[f"gpu{gpu}"] = {"summaries": int(b["summaries"] - a["summaries"]),
                                     "gpu_busy_fraction": (b["busy_s"] - a["busy_s"]) / wall}
        return {"documents": len(docs), "summaries_read": len(read), "produce_s": t_produced - t0, "wall_s": wall,
                "docs_per_s": len(read) / wall, "children": children,
                "partitions": partitions_held(self.log, self.since)}

    def kill_one(self, docs: list[dict], rate: float, timeout_s: float, restart_timeout_s: float) -> dict:
        """A steady load; a quarter in, the last child gets SIGKILL. None lost, its restart, the others' pause."""
        victim = self.gpus[-1]
        before = children_of(self.proc.pid)
        load = SteadyLoad(self.topics, docs, rate, timeout_s, prefix="kill-")
        t0 = load.start()
        time.sleep(max(0.0, t0 + len(docs) / rate / 4 - time.monotonic()))
        t_kill = time.monotonic()
        os.kill(before[victim], signal.SIGKILL)
        sent, seen = load.result()
        vport = self.ports[-1]
        t_back = None
        deadline = time.monotonic() + restart_timeout_s
        while t_back is None and time.monotonic() < deadline:  # the restarted child's first ready sample
            t_back = next((t for t, _, ready in self.sampler.series[vport] if t > t_kill + 0.5 and ready), None)
            time.sleep(0.2)
        after = children_of(self.proc.pid)
        end = t_back if t_back is not None else time.monotonic()
        t_last = max((v[0] for v in seen.values()), default=end)  # the last summary of the load read
        pauses = {f"gpu{gpu}": survivor_pause([(t, c["summaries"]) for t, c, _ in self.sampler.series[port]
                                               if c is not None], t_kill, end, t_last)
                  for gpu, port in zip(self.gpus[:-1], self.ports[:-1])}
        latencies = sorted(seen[i][0] - sent[i] for i in seen if i in sent)
        series = {f"gpu{gpu}": [(round(t - t_kill, 2), None if c is None else int(c["summaries"]), ready)
                                for t, c, ready in self.sampler.series[port] if t_kill - 2.0 <= t <= end + 2.0]
                  for gpu, port in zip(self.gpus, self.ports)}  # (s from the kill, summaries, ready)
        return {"documents": len(docs), "rate_docs_per_s": rate, "killed": f"gpu{victim}",
                "killed_pid": before[victim], "restarted_pid": after.get(victim),
                "kill_at_s": t_kill - t0, "summarized": len(seen), "lost": sorted(set(sent) - set(seen)),
                "restart_ready_after_kill_s": None if t_back is None else t_back - t_kill,
                "last_summary_after_kill_s": t_last - t_kill,
                "other_children_longest_pause_s": pauses,
                "latency_s": {"p50": latencies[len(latencies) // 2], "max": latencies[-1]} if latencies else None,
                "partitions_after": partitions_held(self.log, self.since), "series_from_kill": series}

    def stop(self, timeout_s: float = 120.0) -> int | None:
        self.sampler.halt.set()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = None
        self._log.close()
        return code


def documents(n: int, prefix: str, seed: int) -> list[dict]:
    return [{**d, "id": f"{prefix}-{i}"} for i, d in enumerate(corpus(n, seed=seed))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-random", help="model path (default: the tiny random model)")
    ap.add_argument("--arch-config", help="random weights of this architecture instead, e.g. "
                                          "config/models/qwen2.5-0.5b.json")
    ap.add_argument("--gpus", default="all", help="the GPUs of the N-GPU run (all or 0,1,...); the 1-GPU run "
                                                  "takes the first")
    ap.add_argument("--device", default="auto", help="model.device of the children (cpu: the GPU indexes are names)")
    ap.add_argument("--documents", type=int, default=6000)
    ap.add_argument("--repeats", type=int, default=1, help="backlogs per run, one after the other (the median "
                                                             "is reported)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--token-budget", default="524288", help="packer.token_budget (524,288: the 0.5B "
                                                              "architecture's autotuned budget on the H200)")
    ap.add_argument("--broker", choices=["embedded", "apache"], default="embedded",
                    help="the embedded broker (Tansu), or the tests' one-node Apache Kafka")
    ap.add_argument("--session-timeout-ms", type=int, default=10_000, help="kafka.session_timeout_ms")
    ap.add_argument("--kill-load", type=float, default=0.5, help="the kill run's load, a fraction of the N-GPU rate")
    ap.add_argument("--kill-seconds", type=float, default=40.0)
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--env", action="append", default=[], metavar="RIBBON_X=V",
                    help="a further setting of the children (repeatable), e.g. RIBBON_MODEL__PROCESS=on")
    ap.add_argument("--skip-single", action="store_true", help="only the run on all of --gpus")
    ap.add_argument("--ready-timeout", type=float, default=240.0)
    ap.add_argument("--timeout", type=float, default=180.0, help="per backlog or kill run, after producing")
    ap.add_argument("--base-port", type=int, default=19464)
    ap.add_argument("--log", default=None, help="the supervisors' output (default: in the temp folder)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    gpus = parse_gpus(a.gpus, 0 if a.device == "cpu" and a.gpus == "all" else None)
    machine = machine_name("cpu" if a.device == "cpu" else "cuda")
    tmp = Path(tempfile.mkdtemp(prefix="ribbon-multigpu-"))
    log = Path(a.log) if a.log else tmp / "supervisors.log"
    if a.arch_config:
        model = random_checkpoint(a.arch_config, tmp)
    else:  # `ribbon run` refuses the name tiny-random (it never publishes noise): hand its children a folder
        model = str(make_tiny_checkpoint(tmp / "tiny")) if a.model == "tiny-random" else a.model
    result: dict = {"machine": machine, "broker": a.broker, "env": a.env, "gpus": gpus, "device": a.device, "model": a.arch_config or a.model,
                    "documents": a.documents, "corpus": "short", "partitions": a.partitions,
                    "max_new_tokens": a.max_new_tokens, "token_budget": a.token_budget,
                    "session_timeout_ms": a.session_timeout_ms, "runs": {},
                    "command": "python -m bench.multigpu " + " ".join(argv if argv is not None else sys.argv[1:])}
    ok = True
    try:
        if a.broker == "apache":  # the tests' one-node Apache Kafka (Maven Central jars, `make test` fetches them)
            sys.path.insert(0, str(ROOT))
            from tests.apache_kafka import ApacheKafka  # noqa: PLC0415 - only for --broker apache

            broker_cm = ApacheKafka(log_path=tmp / "broker.log")
        else:
            broker_cm = EmbeddedBroker(log_path=tmp / "broker.log")
        with broker_cm as broker:
            plan = [("1gpu", gpus[:1])] + ([(f"{len(gpus)}gpu", gpus)] if len(gpus) > 1 else [])
            plan = plan[-1:] if a.skip_single else plan
            for label, use in plan:
                run = Run(a, broker, model, use, label, log)
                r: dict = {}
                try:
                    ready_s = run.wait_ready(a.ready_timeout)
                    reps = [run.backlog(documents(a.documents, f"{label}.{i}", 11 + i), a.timeout)
                            for i in range(a.repeats)]
                    r = sorted(reps, key=lambda x: x["docs_per_s"])[len(reps) // 2]  # the median
                    r.update(ready_after_start_s=ready_s, docs_per_s_repeats=[x["docs_per_s"] for x in reps])
                    ok &= all(x["summaries_read"] == x["documents"] for x in reps)
                    print(f"{label}: {r['docs_per_s']:.1f} docs/s ({r['summaries_read']}/{r['documents']} in "
                          f"{r['wall_s']:.2f} s), children {r['children']}, partitions {r['partitions']}", flush=True)
                    if use is plan[-1][1] and not a.no_kill:  # the last run (on one GPU: its only child)
                        n = max(1, int(a.kill_load * r["docs_per_s"] * a.kill_seconds))
                        k = r["kill"] = run.kill_one(documents(n, "kill", 12), n / a.kill_seconds, a.timeout,
                                                     a.ready_timeout)
                        print(f"kill: {k['summarized']}/{k['documents']} summarized, lost {len(k['lost'])}; "
                              f"{k['killed']} pid {k['killed_pid']} -> {k['restarted_pid']}, ready again after "
                              f"{k['restart_ready_after_kill_s']} s; others' longest pause "
                              f"{k['other_children_longest_pause_s']} s", flush=True)
                        ok &= not k["lost"] and k["restarted_pid"] not in (None, k["killed_pid"])
                finally:
                    r["supervisor_exit_code"] = run.stop()
                    result["runs"][label] = r
                ok &= r["supervisor_exit_code"] == 0
        one, many = result["runs"].get("1gpu", {}), result["runs"].get(f"{len(gpus)}gpu", {})
        if one.get("docs_per_s") and many.get("docs_per_s") and len(gpus) > 1:
            result["scaling_efficiency"] = many["docs_per_s"] / (len(gpus) * one["docs_per_s"])
            print(f"scaling efficiency on {len(gpus)} GPUs: {result['scaling_efficiency']:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(a.out or f"bench/results/multigpu_{machine}x{len(gpus)}.json", result)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
