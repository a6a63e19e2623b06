"""Prompt ids from the preprocessing pool (worker/digest/tokens.py): through the real tiny tokenizer,
the pool (1 or 2 processes) and the calling thread give the plans the ingest thread used to make
itself (token gate, then planner), and digest mode loads no tokenizer."""

from __future__ import annotations

import pytest

from worker.digest.prepared import PrepareOptions, Prepared
from worker.digest.prompt import DocumentText, token_gate
from worker.digest.tokens import Framer, choose_ids
from worker.engine.loader import load_engine
from worker.samples import mixed_corpus
from worker.service.app import Parts, make_planner
from worker.service.preprocess import Preprocessor
from worker.settings import ModelSettings, load_settings

MIN_SAVING = 0.2
OPTIONS = PrepareOptions(highlights=3, compaction=True, min_saving=MIN_SAVING, render=False)


@pytest.fixture(scope="module")
def planner(tiny_model):
    settings = load_settings(environ={})
    engine = load_engine(ModelSettings(path=tiny_model, max_new_tokens=8))
    # a small budget: the long documents of the corpus go in chunks (the path that tokenizes again)
    return make_planner(settings, engine, Parts(engine, None, budget=1_024, reserve=8))


@pytest.fixture(scope="module")
def corpus():
    docs = mixed_corpus(60, seed=5)
    docs.append({"lines": ["a line <|im_end|>\n<|im_start|>system", "é ✓ \t tabs"], "source": None, "kind": None})
    return ["\n".join(d["lines"]) for d in docs], [d.get("source") for d in docs], [d.get("kind") for d in docs]


def _old_ingest(planner, texts, preps):
    """What the ingest thread did before: the token gate (raw + digest prompt counted), then plan_many."""
    chosen = [DocumentText(p.prompt, True, 0, 0) if p.prompt is not None else DocumentText(t, False, 0, 0)
              for p, t in zip(preps, texts)]
    gated = token_gate(texts, chosen, min_saving=MIN_SAVING, count=planner.count)
    plans = planner.plan_many([c.text for c in gated])
    return [(p.prompts, p.document_tokens, p.truncated, c.compacted, c.raw_tokens or p.document_tokens)
            for p, c in zip(plans, gated)]


def _new_ingest(planner, texts, preps: list[Prepared]):
    plans = [planner.plan_ids(p.prompt if p.prompt is not None else t, p.ids) for p, t in zip(preps, texts)]
    return [(pl.prompts, pl.document_tokens, pl.truncated, p.prompt is not None, p.raw_tokens)
            for pl, p in zip(plans, preps)]


@pytest.mark.parametrize("processes", [0, 1, 2])
def test_pool_and_calling_thread_give_the_plans_the_ingest_thread_made_itself(planner, corpus, processes):
    texts, sources, kinds = corpus
    framer = Framer(planner.prompt_batch, planner.overhead)
    pre = Preprocessor(processes, OPTIONS, framer, planner.token_spec)
    try:
        assert pre.pool_tokenizes == (processes > 0)  # the processes loaded the spec's tokenizer, same ids
        got = pre.run(texts, sources, kinds)
    finally:
        pre.close()
    assert all(p.error is None and p.ids is not None and p.ids.dtype.name == "int32" for p in got)
    new = _new_ingest(planner, texts, got)
    # the reference: passes without a framer (character gate only), then the old ingest path
    assert new == _old_ingest(planner, texts, Preprocessor(0, OPTIONS).run(texts, sources, kinds))
    compacted = [n[3] for n in new]
    assert any(compacted) and not all(compacted)  # both kinds in the corpus
    assert any(len(n[0]) > 1 for n in new)  # a chunked document
    assert all(n[1] <= n[4] for n in new)  # never more tokens than raw


def test_a_digest_prompt_over_the_token_gate_goes_raw(planner):
    """The character gate passed, the tokens did not: the model gets the raw text (and its ids)."""
    framer = Framer(planner.prompt_batch, planner.overhead)
    raw = "ok " * 40
    p = Prepared({}, [], "Digest: " + "zq\u00e9" * 30, None, 0.0)  # fewer characters, many more tokens
    (out,) = choose_ids([raw], [p], framer, MIN_SAVING)
    assert out.prompt is None and out.ids.tolist() == planner.prompt(raw)
    assert out.raw_tokens == len(planner.prompt(raw)) - planner.overhead


def test_a_tokenizer_failure_fails_its_document_alone(planner):
    def prompt_batch(texts):
        if any("bad" in t for t in texts):
            raise ValueError("cannot encode")
        return planner.prompt_batch(texts)

    preps = [Prepared({}, [], None, None, 0.0) for _ in range(3)]
    out = choose_ids(["fine", "bad one", "fine too"], preps, Framer(prompt_batch, planner.overhead), MIN_SAVING)
    assert [p.error for p in out] == [None, "tokenizer: ValueError: cannot encode", None]
    assert out[2].ids.tolist() == planner.prompt("fine too")


def test_without_a_spec_the_calling_thread_tokenizes_after_the_pool(planner, corpus):
    texts, sources, kinds = corpus
    framer = Framer(planner.prompt_batch, planner.overhead)
    pre = Preprocessor(1, OPTIONS, framer, None)
    try:
        got = pre.run(texts[:20], sources[:20], kinds[:20])
    finally:
        pre.close()
    want = Preprocessor(0, OPTIONS, framer).run(texts[:20], sources[:20], kinds[:20])
    assert not pre.pool_tokenizes
    assert [(p.ids.tolist(), p.raw_tokens, p.prompt) for p in got] == \
        [(p.ids.tolist(), p.raw_tokens, p.prompt) for p in want]


def test_digest_mode_loads_no_tokenizer_in_the_pool(planner, corpus):
    texts, sources, kinds = corpus
    digest_mode = PrepareOptions(highlights=3, compaction=False, min_saving=MIN_SAVING, render=True)
    pre = Preprocessor(1, digest_mode, None, planner.token_spec)  # no framer: digest mode
    try:
        got = pre.run(texts[:5], sources[:5], kinds[:5])
        loaded = pre._pool.submit(eval, "'transformers' in __import__('sys').modules").result()
    finally:
        pre.close()
    assert not pre.pool_tokenizes and not loaded
    assert all(p.ids is None and p.raw_tokens == 0 and p.summary for p in got)
