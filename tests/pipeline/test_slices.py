"""No tokenizer call takes more than pipeline.max_document_bytes of text (worker/pipeline/slices.py):
long documents are counted by slices and chunked, never tokenized whole, and plan as before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.pipeline.planner import PlanLimits, Planner
from worker.pipeline.slices import bounded_count, groups, nbytes, slices

lines = st.lists(st.text(alphabet=st.sampled_from("ab é€\t😀"), max_size=40), max_size=60)


@settings(deadline=None, max_examples=200)
@given(lines, st.integers(4, 80))
def test_slices_give_the_text_back_each_within_the_limit(parts, limit):
    text = "\n".join(parts)
    got = slices(text, limit)
    assert "".join(got) == text
    assert all(nbytes(s) <= limit for s in got)


def test_groups_stay_within_the_limit_and_a_long_text_goes_alone():
    texts = ["a" * 30, "b" * 30, "c" * 100, "d" * 10]
    assert [list(g) for g in groups(texts, 64)] == [[0, 1], [2], [3]]


class Tokenizer:
    """Words as tokens; records the bytes of text of every call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def count(self, texts) -> list[int]:
        self.calls.append(sum(nbytes(t) for t in texts))
        return [len(t.split()) for t in texts]

    def prompt_batch(self, texts) -> list[list[int]]:
        self.calls.append(sum(nbytes(t) for t in texts))
        return [[1, *(len(w) for w in t.split()), 2] for t in texts]

    def prompt(self, text: str) -> list[int]:
        return self.prompt_batch([text])[0]


def test_a_word_count_by_slices_is_the_whole_count():
    tok = Tokenizer()
    doc = "\n".join(f"line {i} link down on eth{i % 4}" for i in range(2000))
    assert bounded_count(tok.count, 1000)([doc, "x y", doc]) == [len(doc.split()), 2, len(doc.split())]
    assert max(tok.calls) <= 1000


def test_a_long_document_is_chunked_as_before_without_any_call_over_the_limit():
    doc = "\n".join(f"2026-12-01T20:38:{i % 60:02d}Z amf-2 ERROR link {i} down on eth{i % 4}" for i in range(3000))
    short = "disk full on upf-1"
    whole, bounded = Tokenizer(), Tokenizer()
    kw = {"max_prompt_tokens": 200, "max_new_tokens": 4}
    before = Planner(whole.prompt, whole.count, PlanLimits(**kw), prompt_batch=whole.prompt_batch).plan_many(
        [short, doc, short])
    bounded.calls.clear()
    planner = Planner(bounded.prompt, bounded.count, PlanLimits(**kw, max_text_bytes=4096), prompt_batch=bounded.prompt_batch)
    bounded.calls.clear()
    after = planner.plan_many([short, doc, short])
    assert after == before and len(after[1].prompts) > 10
    assert max(whole.calls) > len(doc) and max(bounded.calls) <= 4096
    assert planner.plan(doc) == after[1]


def test_truncation_of_a_long_document_keeps_its_head():
    tok = Tokenizer()
    doc = "\n".join(f"line {i}" for i in range(5000))
    plan = Planner(tok.prompt, tok.count, PlanLimits(60, truncate=True, max_text_bytes=4096)).plan(doc)
    assert plan.truncated and len(plan.prompts) == 1 and len(plan.prompts[0]) <= 60
    assert plan.prompts[0][:4] == (1, 4, 1, 4)  # "line 0 line 1 ..."
