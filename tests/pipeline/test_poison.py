"""A poison message never stops ingest: every decode path is bounded, and a last-resort guard
dead-letters what still raises (class `internal_error`) and goes on."""

from __future__ import annotations

import orjson
import pytest

from ingest_fakes import Msg, make_ingest
from worker.messages.models import MAX_JSON_DEPTH, BadMessage, decode_input
from worker.kafka.headers import parse_dead_letter_headers

LIMIT = 1 << 22


def _deep(depth: int, leaf: bytes = b"1", kind: str = "list") -> bytes:
    if kind == "list":
        return b"[" * depth + leaf + b"]" * depth
    return b'{"k":' * depth + leaf + b"}" * depth


def _on_a_deep_stack(fn, frames: int = 80):
    """Run `fn` below `frames` Python frames, as the ingest thread does (decode is not at the top of a stack)."""
    return fn() if frames == 0 else _on_a_deep_stack(fn, frames - 1)


@pytest.mark.parametrize("depth", [990, 1000, 1023])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_an_unknown_field_nested_about_a_thousand_deep_is_a_schema_dead_letter_with_its_path(depth, kind):
    value = b'{"text": "x", "unknown": ' + _deep(depth, kind=kind) + b', "attributes": {"a": 1e300}}'
    with pytest.raises(BadMessage) as exc:
        _on_a_deep_stack(lambda: decode_input(value, max_bytes=LIMIT))
    assert exc.value.error_class == "schema"
    assert exc.value.message.startswith("unknown.") and f"deeper than {MAX_JSON_DEPTH}" in exc.value.message


def test_a_float_beyond_2_63_deep_inside_an_unknown_field_is_a_dead_letter_not_a_recursion_error():
    value = b'{"text": "x", "other": ' + _deep(1000, b"18446744073709551616.5") + b', "attributes": {"n": 1e19}}'
    with pytest.raises(BadMessage) as exc:
        _on_a_deep_stack(lambda: decode_input(value, max_bytes=LIMIT))
    assert exc.value.error_class == "schema" and "other." in exc.value.message


def test_unknown_fields_within_the_depth_bound_are_still_ignored():
    value = b'{"text": "x", "extra": ' + _deep(MAX_JSON_DEPTH - 1) + b', "attributes": {"n": 18446744073709551615}}'
    msg = _on_a_deep_stack(lambda: decode_input(value, max_bytes=LIMIT))
    assert msg.attributes == {"n": 18446744073709551615}


def test_any_failure_inside_decoding_is_a_schema_dead_letter(monkeypatch):
    import worker.messages.models as messages

    def boom(*_a, **_k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(messages.json, "loads", boom)  # the exact re-parse, for attributes holding a big float
    with pytest.raises(BadMessage) as exc:
        decode_input(b'{"text": "x", "attributes": {"n": 1e300}}', max_bytes=LIMIT)
    assert exc.value.error_class == "schema" and "RecursionError" in exc.value.message
    monkeypatch.setattr(messages.orjson, "loads", lambda *_a: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(BadMessage) as exc:
        decode_input(b'{"text": "x"}', max_bytes=LIMIT)
    assert exc.value.error_class == "schema" and "MemoryError" in exc.value.message


def _dead_letters(tracker, tp=("in", 0)):
    tracker.complete(tp, tracker.epoch(tp), 0, ()) if tracker.pending() else None
    return [(r, parse_dead_letter_headers(r.headers)) for ready in tracker.take_ready() for r in ready.records]


def test_an_exception_from_one_message_is_an_internal_error_dead_letter_and_ingest_goes_on(monkeypatch):
    import worker.pipeline.source as source_mod

    ing, tracker, registry = make_ingest()
    real = source_mod.decode_input

    def decode(value, **kw):
        if value == b"poison":
            raise KeyError("a bug, not bad input")
        return real(value, **kw)

    monkeypatch.setattr(source_mod, "decode_input", decode)
    ing._ingest([Msg(b"poison", 0), Msg(orjson.dumps({"text": "disk full on upf-1"}), 1)])
    assert len(ing.packer.submitted) == 1 and len(registry) == 1
    (ready,) = tracker.take_ready()
    assert ready.offsets == (0,)
    h = parse_dead_letter_headers(ready.records[0].headers)
    assert h.error_class == "internal_error" and h.error_message.startswith("KeyError")
    get = ing.metrics.registry.get_sample_value
    assert get("ribbon_internal_errors_total", {"stage": "decode", "exception": "KeyError"}) == 1
    assert get("ribbon_dead_lettered_messages_total", {"reason": "internal_error"}) == 1


def test_planning_that_raises_for_one_document_dead_letters_it_alone():
    ing, tracker, registry = make_ingest()
    plan_many = ing.planner.plan_many

    def plan(texts):
        if any("poison" in t for t in texts):
            raise RecursionError("maximum recursion depth exceeded")
        return plan_many(texts)

    ing.planner.plan_many = plan
    ing._ingest([Msg(b"good one", 0), Msg(b"poison here", 1), Msg(b"good two", 2)])
    assert len(ing.packer.submitted) == 2 and len(registry) == 2
    epoch = tracker.epoch(("in", 0))
    tracker.complete(("in", 0), epoch, 0, ())
    (ready,) = tracker.take_ready()
    assert ready.offsets == (0, 1)
    h = parse_dead_letter_headers(ready.records[0].headers)
    assert (h.error_class, h.source_offset) == ("internal_error", "1") and "RecursionError" in h.error_message
