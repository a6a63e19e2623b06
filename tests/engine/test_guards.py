"""Generation guards (worker/engine/guards.py): pure functions per row, and through the packed decode."""

from __future__ import annotations

import pytest
import torch

from worker.engine.guards import GuardConfig, apply_guards, block_ngrams, hold_eos, penalize_repeats
from guard_helpers import DOCS, _favour, _letters, _ngrams, _run

V = 10


def _hist(rows: list[list[int]], width: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.full((len(rows), width), 7, dtype=torch.int64)  # 7: garbage past each row's length
    for i, r in enumerate(rows):
        h[i, : len(r)] = torch.tensor(r, dtype=torch.int64)
    return h, torch.tensor([len(r) for r in rows], dtype=torch.int64)


def test_repetition_penalty_touches_only_each_rows_own_tokens():
    logits = torch.tensor([[2.0] * V, [-2.0] * V])
    h, n = _hist([[1, 3], [4]])
    out = penalize_repeats(logits, h, n, 2.0)
    assert out[0, 1] == 1.0 and out[0, 3] == 1.0 and out[0, 4] == 2.0 and out[0, 7] == 2.0
    assert out[1, 4] == -4.0 and out[1, 1] == -2.0 and out[1, 7] == -2.0


def test_no_repeat_ngram_blocks_the_token_that_would_repeat_a_rows_own_trigram():
    logits = torch.zeros(3, V)
    # row 0 generated 1 2 3 ... 1 2: a 3 next would repeat "1 2 3"; row 1 has "1 2" but no "1 2 3";
    # row 2 generated "1 2 3" once, but its tail (2 3) starts no earlier trigram
    h, n = _hist([[1, 2, 3, 5, 1, 2], [5, 1, 2], [1, 2, 3]])
    out = block_ngrams(logits, h, n, 3)
    assert torch.isinf(out[0, 3]) and out[0, 3] < 0
    assert torch.isfinite(out[0]).sum() == V - 1
    assert torch.isfinite(out[1]).all() and torch.isfinite(out[2]).all()


def test_no_repeat_ngram_ignores_tokens_past_a_rows_length():
    h = torch.tensor([[1, 2, 1, 2, 9, 9, 9, 9]])
    out = block_ngrams(torch.zeros(1, V), h, torch.tensor([3]), 2)  # generated 1 2 1: a 2 next repeats "1 2"
    assert torch.isinf(out[0, 2]) and torch.isfinite(out[0, 9])


def test_min_new_tokens_holds_eos_only_for_short_rows():
    eos = torch.tensor([0, 5])
    out = hold_eos(torch.zeros(2, V), torch.tensor([1, 4]), 3, eos)
    assert torch.isinf(out[0, 0]) and torch.isinf(out[0, 5]) and torch.isfinite(out[0, 1])
    assert torch.isfinite(out[1]).all()


def test_tokens_without_letters_are_penalized_and_blocked_like_words():
    """No token is exempt: a loop of "[1] [1] [1]" is a loop as much as one of words."""
    h, n = _hist([[1, 2, 1, 2, 1]])
    assert torch.isinf(block_ngrams(torch.zeros(1, V), h, n, 2)[0, 2])  # 2 would repeat "1 2"
    out = penalize_repeats(torch.ones(1, V), h, n, 2.0)
    assert out[0, 1] == 0.5 and out[0, 2] == 0.5 and out[0, 3] == 1.0


def test_guards_off_return_the_logits_unchanged():
    logits = torch.randn(2, V)
    h, n = _hist([[1, 1, 1], [2]])
    assert apply_guards(logits, GuardConfig(), h, n, torch.tensor([0])) is logits


@pytest.mark.parametrize("bad", [{"repetition_penalty": 0.9}, {"no_repeat_ngram": 1}, {"min_new_tokens": -1}])
def test_a_bad_guard_is_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        GuardConfig(**bad)


# ---- through the packed decode --------------------------------------------------------------

def _engine(tiny_model, **options):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.engine.loader import engine_for_model

    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    return engine_for_model(model, tok, attention="reference", cuda_graphs=False, **options)


def test_no_repeat_ngram_in_the_packed_decode_acts_per_document(tiny_model):
    """A model that picks among three tokens loops; with the guard no document repeats a trigram of its
    own, and each document's tokens are the ones it gets alone in a bin (its guard read only its own
    history)."""
    plain = _engine(tiny_model, max_new_tokens=24)
    _favour(plain, _letters(plain, 3), 50.0)
    assert any(len(set(_ngrams(g.token_ids, 3))) < len(_ngrams(g.token_ids, 3)) for g in _run(plain, DOCS))
    eng = _engine(tiny_model, max_new_tokens=24, guards=GuardConfig(no_repeat_ngram=3))
    _favour(eng, _letters(eng, 3), 50.0)
    packed = _run(eng, DOCS)
    assert len({tuple(g.token_ids) for g in packed}) > 1  # the documents differ: a mix-up would show
    for g in packed:
        grams = _ngrams(g.token_ids, 3)
        assert len(set(grams)) == len(grams)
    alone = [_run(eng, [d])[0] for d in DOCS]
    assert [g.token_ids for g in packed] == [g.token_ids for g in alone]


def test_repetition_penalty_in_the_packed_decode_matches_each_document_alone(tiny_model):
    eng = _engine(tiny_model, max_new_tokens=16, guards=GuardConfig(repetition_penalty=1.8))
    packed = _run(eng, DOCS)
    alone = [_run(eng, [d])[0] for d in DOCS]
    assert [g.token_ids for g in packed] == [g.token_ids for g in alone]
    plain = _run(_engine(tiny_model, max_new_tokens=16), DOCS)
    assert [g.token_ids for g in packed] != [g.token_ids for g in plain]


def test_min_new_tokens_in_the_packed_decode_holds_eos(tiny_model):
    """EOS as an only allowed choice shows the hold: with min_new_tokens, no document ends before it."""
    eng = _engine(tiny_model, max_new_tokens=12, guards=GuardConfig(min_new_tokens=6))
    _favour(eng, [eng.eos_ids[0]], 1e4)  # EOS the argmax everywhere: every document would end at once
    outs = _run(eng, DOCS)
    assert all(len(g.token_ids) == 6 and g.finish_reason == "eos" for g in outs)


def test_a_stop_string_in_the_last_steps_still_cuts_the_text(tiny_model):
    """A document that reaches max_new_tokens with a stop string inside: cut at the stop, reason 'stop'."""
    eng = _engine(tiny_model, max_new_tokens=12)
    full = _run(eng, DOCS)[0]
    assert full.finish_reason == "length" and len(full.text) > 4
    stop = full.text[-3:]  # a string seen only at the very end: the loop's looks never saw it
    eng.options.stop_strings = (stop,)
    cut = _run(eng, DOCS)[0]
    assert cut.finish_reason == "stop" and cut.text == full.text[: full.text.index(stop)]


def _letterless(eng) -> list[int]:
    """The ids of "[", "1" and "]": tokens without a letter."""
    return [eng.tokenizer.convert_tokens_to_ids(t) for t in ("[", "1", "]")]


def test_a_loop_of_tokens_without_letters_is_broken_by_the_guards(tiny_model):
    """The model favours "[", "1" and "]": with the default guards (penalty 1.1, no repeated 4-gram) no
    document repeats a 4-gram of them; before, such tokens were exempt and "[1] [1] [1] ..." ran to the cap."""
    eng = _engine(tiny_model, max_new_tokens=24, guards=GuardConfig(repetition_penalty=1.1, no_repeat_ngram=4))
    _favour(eng, _letterless(eng), 50.0)
    for g in _run(eng, DOCS):
        grams = _ngrams(g.token_ids, 4)
        assert len(g.token_ids) == 24 and len(set(grams)) == len(grams)


def test_an_output_that_still_loops_is_cut_where_the_loop_starts(tiny_model):
    """Guards off, one favoured letterless token: the decode loop ends the document at its loop (its text
    cut there, finish reason "loop") instead of generating to max_new_tokens."""
    eng = _engine(tiny_model, max_new_tokens=40, cut_loops=True)
    one = eng.tokenizer.convert_tokens_to_ids("1")
    _favour(eng, [one], 50.0)
    for g in _run(eng, DOCS):
        assert g.finish_reason == "loop" and one not in g.token_ids[-1:] and len(g.token_ids) < 8
    plain = _engine(tiny_model, max_new_tokens=40)
    _favour(plain, [one], 50.0)
    assert all(g.finish_reason == "length" and g.text.endswith("1" * 30) for g in _run(plain, DOCS))
