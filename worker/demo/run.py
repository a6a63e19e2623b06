"""`ribbon demo`: the whole pipeline on one machine, nothing to configure.

Starts the embedded broker, produces synthetic telemetry (short documents and,
every tenth, a long repetitive log with injected faults; plus a few bad
messages, to show the dead-letter topic), runs the worker, reads every output
back and prints what came out: each document's digest in plain English, its
highlights, and the model's token counts and timings. The default model is
SmolLM2-135M-Instruct (`smollm2-135m`, fetched and converted once): its
summary, after the grounding check, is shown next to the digest rendering for
a handful of documents. On a CPU a real model gets 8 documents (every third a
long log) unless --documents says otherwise. --model tiny-random runs 200
documents through random weights: their text is noise, so it is never shown as
a summary (--show-model-text prints it, labelled as noise); --mode digest runs
with no model at all.
"""

from __future__ import annotations

import time
from collections import Counter

import orjson
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from tqdm import tqdm

from worker.demo.lines import LINES_TOPIC, published_as, run_lines, windowed_settings
from worker.demo.samples import mixed_corpus
from worker.digest.render import render
from worker.kafka import clients
from worker.kafka.broker import EmbeddedBroker
from worker.kafka.config import embedded_settings, plain_config
from worker.kafka.headers import ERROR_CLASS, ERROR_MESSAGE, ribbon_values
from worker.pipeline.app import Worker

SHOWN = 3  # documents printed in full
SHOWN_REAL = 5  # ... with a real model: its summary next to the digest
CPU_REAL_DOCUMENTS = 8  # default documents for a real model on a CPU (every third a long one)

BAD = (b"\xff\xfe not utf-8", b'{"text": ', b'{"lines": []}', b"   ")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = clients.producer(plain_config(bootstrap).tool_producer())
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=f"k{i}".encode())
        p.poll(0)
    if p.flush(30):
        raise RuntimeError("demo input was not acknowledged by the broker")


def read(bootstrap: str, topics: list[str], expected: int, timeout_s: float, progress: bool) -> list:
    # assign(), not a group: a group join on the embedded broker blocks ~half of session.timeout.ms.
    c = clients.consumer(plain_config(bootstrap).tool_consumer(f"demo-reader-{time.time_ns()}",
                                                               **{"isolation.level": "read_committed"}))
    c.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in topics])  # one partition each (run_demo)
    out: list = []
    deadline = time.monotonic() + timeout_s
    with tqdm(total=expected, desc="summaries", unit="doc", disable=not progress) as bar:
        while len(out) < expected and time.monotonic() < deadline:
            got = [m for m in c.consume(500, 0.2) if m.error() is None]
            out.extend(got)
            bar.update(len(got))
    c.close()
    return out


def default_documents(settings) -> tuple[int, int]:
    """(documents, every how many a long one): a real model on a CPU gets a handful, mostly long ones."""
    real = settings.model.mode != "digest" and settings.model.path != "tiny-random"
    on_cpu = settings.model.device == "cpu" or (settings.model.device == "auto" and not _cuda())
    return (CPU_REAL_DOCUMENTS, 3) if real and on_cpu else (200, 10)


def _cuda() -> bool:
    import torch  # noqa: PLC0415 torch (~1.5 s) off a digest-mode demo

    return torch.cuda.is_available()


def run_demo(settings, documents: int | None, timeout_s: float, progress: bool = True,
             show_model_text: bool = False) -> int:
    settings = windowed_settings(settings)  # a windowed syslog stream next to the documents
    k = settings.kafka
    with EmbeddedBroker() as broker:
        broker.create_topics({k.input_topics[0]: 4, LINES_TOPIC: 2, k.output_topic: 1, k.dlq_topic: 1})
        s = embedded_settings(settings, broker.bootstrap)
        what = "no model (digest mode)" if s.model.mode == "digest" else f"model {s.model.path!r}"
        print(f"embedded broker on {broker.bootstrap}; loading {what} ...", flush=True)
        worker = Worker(s, broker.bootstrap)
        default_n, every = default_documents(s)
        docs = [orjson.dumps(d) for d in mixed_corpus(documents or default_n, every=every)]
        t0 = time.monotonic()
        worker.start()
        produce(broker.bootstrap, k.input_topics[0], docs + list(BAD))
        got = read(broker.bootstrap, [k.output_topic, k.dlq_topic], len(docs) + len(BAD), timeout_s, progress)
        wall = time.monotonic() - t0
        digest_s = worker.metrics.registry.get_sample_value("ribbon_digest_seconds_total") or 0.0
        lines_ok, lines_report = run_lines(broker.bootstrap, k.output_topic, timeout_s)
        worker.drain(30)
        worker.close()
    outs = [orjson.loads(m.value()) for m in got if m.topic() == k.output_topic]
    dlq = [m for m in got if m.topic() == k.dlq_topic]
    generative = settings.model.mode != "digest"
    random_model = settings.model.path == "tiny-random"
    if generative and not random_model:
        shown = sorted(outs, key=lambda o: -o["digest"]["lines"])[:SHOWN_REAL]
    else:
        shown = sorted(outs, key=lambda o: -o["digest"]["lines"])[:1] + [o for o in outs[:SHOWN]]
    for o in {o["id"]: o for o in shown}.values():
        _show(o, generative, random_model, show_model_text)
    for m in dlq:
        h = ribbon_values(m.headers())
        print(f"dead letter: {h.get(ERROR_CLASS, '?')}: {h.get(ERROR_MESSAGE, '')[:90]}")
    _stats(outs, docs, dlq, wall, digest_s, generative, worker, random_model)
    print(lines_report)
    return 0 if len(outs) == len(docs) and len(dlq) == len(BAD) and lines_ok else 1


def _show(o: dict, generative: bool, random_model: bool, show_model_text: bool) -> None:
    t, ms = o["tokens"], o["timing_ms"]
    print(f"\n{o['id']} ({o['source']}, {o['digest']['lines']:,} lines)")
    if generative and not random_model:
        g = o.get("grounding") or {}
        note = ""
        if g.get("unsupported"):
            note = f"  ({', '.join(g['unsupported'][:4])} cited by the model, found nowhere in the input: " \
                   f"{g['dropped_sentences']} sentence(s) dropped)"
        print(f"  published:  {o['summary']['text']}")
        print(f"              ({published_as(o['summary'])}){note}")
        if o["summary"]["source"] == "model":
            print(f"  digest:     {render(o['digest'], o['source'], o['kind'])}")
    else:
        print(f"  digest:     {o['summary']['text']}")
    print(highlights_text(o["highlights"]))
    if generative:
        print(f"  tokens:     {t['document']:,} document tokens -> {t['input']:,} prompt tokens in "
              f"{t['chunks']} chunk(s), {t['output']} out; queued {ms['queued']:.0f} ms, model {ms['gpu']:.0f} ms, "
              f"total {ms['total']:.0f} ms")
        if random_model and show_model_text:
            print(f"  published (random weights: the gate's {o['summary']['reason']} check): "
                  f"{' '.join(o['summary']['text'].split())[:120]}")


def highlights_text(lines: list[str]) -> str:
    """The highlights as a reader sees them: each verbatim line on its own indented line."""
    if not lines:
        return "  highlights: none (no line stands out)"
    return "\n".join([f"  highlights: the {len(lines)} lines that matter most" if len(lines) > 1 else
                      "  highlights: the line that matters most", *(f"    | {ln}" for ln in lines)])


def _stats(outs: list, docs: list, dlq: list, wall: float, digest_s: float, generative: bool, worker,
           random_model: bool = True) -> None:
    print(f"\n{len(outs)}/{len(docs)} outputs and {len(dlq)}/{len(BAD)} dead letters in {wall:.1f} s "
          f"({len(outs) / wall:.1f} docs/s); digests took {digest_s:.2f} s in all")
    if generative:
        before = sum(o["tokens"]["document"] for o in outs)
        after = sum(o["tokens"]["input"] for o in outs)
        print(f"prompt tokens: {before:,} in the documents, {after:,} given to the model after compaction "
              f"({before / max(1, after):.1f}x fewer; the instruction not counted); {after / wall:.0f} input tokens/s, "
              f"backend {worker.engine.backend}")
        checked = [o["grounding"] for o in outs if o.get("grounding")]
        if checked and not random_model:
            cited = sum(bool(g["unsupported"]) for g in checked)
            print(f"grounding: {cited} of {len(checked)} model summaries cited something found in neither the input "
                  f"nor its digest; {sum(g['dropped_sentences'] for g in checked)} sentence(s) dropped, "
                  f"{sum(g['fallback'] for g in checked)} with nothing left")
            reasons = Counter(o["summary"]["reason"] for o in outs)
            print("publish gate: " + ", ".join(f"{n} {r}" for r, n in reasons.most_common())
                  + " (passed: the model's text is published; any other: the check it failed, the digest is)")
