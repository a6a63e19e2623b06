"""The compaction gate of a window: kept on its bytes without tokenizing the raw window, or counted as a
document is; the byte bound never keeps a prompt that the token gate would refuse."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest

from worker.config.settings import load_settings
from worker.demo.lines import syslog_stream
from worker.demo.samples import QUALITY_KINDS, labelled
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.prompt import kept_by_bytes
from worker.observability.metrics import Metrics
from worker.pipeline.planner import prompt_texts

OPTIONS = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=False)


def syslog_windows(n: int = 12_000, hosts: int = 10, lines: int = 400) -> list[str]:
    """Each host's first `lines` one-line records, joined as a window's text is."""
    by_host: dict[str, list[str]] = defaultdict(list)
    for host, line in syslog_stream(n, hosts, seed=1):
        by_host[host].append(line)
    return ["\n".join(v[:lines]) for v in by_host.values()]


def doc(text: str, window: bool):
    return SimpleNamespace(text=text, prepared=prepare(text, None, None, OPTIONS), window=object() if window else None,
                           document_tokens=0)


@pytest.fixture(scope="module")
def count(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    return lambda texts: [len(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]]


def test_a_window_kept_on_its_bytes_is_never_tokenized_a_document_is_counted():
    settings = load_settings(environ={})
    raw = syslog_windows()[0]
    calls: list[list[str]] = []

    def counting(texts):
        calls.append(list(texts))
        return [len(t) for t in texts]

    window, document = doc(raw, window=True), doc(raw, window=False)
    assert window.prepared.prompt is not None and kept_by_bytes(raw, window.prepared.prompt, min_saving=0.2)
    texts = prompt_texts([window, document], settings.digest, counting, Metrics())
    assert texts == [window.prepared.prompt, document.prepared.prompt]
    assert window.document_tokens is None and document.document_tokens == len(raw)
    assert calls == [[raw, document.prepared.prompt]]  # one batch: the document's raw text and its prompt


def test_a_window_whose_prompt_misses_the_byte_bound_passes_the_token_gate():
    settings = load_settings(environ={"RIBBON_DIGEST__MIN_SAVING": "0.95"})
    raw = syslog_windows()[0]
    window = doc(raw, window=True)
    assert not kept_by_bytes(raw, window.prepared.prompt, min_saving=0.95)
    texts = prompt_texts([window], settings.digest, lambda texts: [len(t) for t in texts], Metrics())
    assert texts == [raw] and window.document_tokens == len(raw)  # refused by the count: the raw text


@pytest.mark.parametrize("min_saving", [0.0, 0.2, 0.5])
def test_the_byte_bound_keeps_only_prompts_the_token_gate_keeps(count, min_saving):
    raws = syslog_windows() + ["\n".join(labelled(kind, 0, 400).message["lines"]) for kind in QUALITY_KINDS]
    kept = 0
    for raw in raws:
        prompt = prepare(raw, None, None, PrepareOptions(3, True, min_saving, False)).prompt
        if prompt is not None and kept_by_bytes(raw, prompt, min_saving=min_saving):
            raw_n, n = count([raw, prompt])
            assert n <= (1.0 - min_saving) * raw_n
            kept += 1
    assert kept >= len(raws) // 2
