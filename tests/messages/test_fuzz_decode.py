"""Fuzz of the input decoder and of ingest's take-in (hypothesis, bounded in time): every input gives
exactly one decoded document or one dead letter with a known reason, and never an exception."""

from __future__ import annotations

import itertools

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingest_fakes import Msg, make_ingest

from worker.messages.models import ERROR_CLASSES, BadMessage, decode_input

LIMIT = 1 << 16
FUZZ = settings(deadline=None, max_examples=250, suppress_health_check=[HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                          max_size=3), max_leaves=10)
keys = st.sampled_from(["text", "lines", "id", "source", "kind", "attributes", "extra", ""]) | st.text(max_size=6)


@st.composite
def deep(draw) -> bytes:
    """A value nested up to ~1100 levels (arrays or objects), with a leaf that may be a huge number."""
    depth = draw(st.integers(0, 1100))
    leaf = draw(st.sampled_from([b"1", b"1e300", b"18446744073709551616", b"-" + b"9" * 30, b'"x"', b"[]",
                                 b"{}", b"12345678901234567890.5"]))
    if draw(st.booleans()):
        return b"[" * depth + leaf + b"]" * depth
    return b'{"k":' * depth + leaf + b"}" * depth


@st.composite
def objects(draw) -> bytes:
    """A JSON object of likely and unlikely fields, some deep, as bytes (maybe cut or spliced)."""
    fields = draw(st.dictionaries(keys, values, max_size=5))
    body = orjson.dumps(fields)[1:-1]
    extra = [b'"%s": %s' % (draw(keys).encode("unicode_escape").replace(b'"', b""), draw(deep()))
             for _ in range(draw(st.integers(0, 2)))]
    doc = b'"text": "ERROR link down"' if draw(st.booleans()) else b""
    raw = b"{" + b", ".join(p for p in (doc, body, *extra) if p) + b"}"
    cut = draw(st.integers(0, len(raw))) if draw(st.integers(0, 9)) == 0 else len(raw)
    return raw[:cut]


inputs = (objects() | deep() | st.binary(max_size=200) | st.text(max_size=200).map(str.encode)
          | st.sampled_from([b"", b" ", b"\xef\xbb\xbf{}", b'"\\ud800"', b"null"]))


@FUZZ
@given(inputs)
def test_the_decoder_gives_a_document_or_a_known_reason(value: bytes) -> None:
    try:
        msg = decode_input(value, max_bytes=LIMIT)
    except BadMessage as err:
        assert err.error_class in ERROR_CLASSES and err.message
    else:
        assert msg.document.strip()


_offsets = itertools.count()
_ingest = make_ingest()


@settings(FUZZ, max_examples=150)
@given(st.lists(inputs | st.none(), min_size=1, max_size=6))
def test_ingest_takes_every_input_to_one_document_or_one_dead_letter(values: list[bytes | None]) -> None:
    ing, tracker, registry = _ingest
    get = ing.metrics.registry.get_sample_value
    dead_before = sum(get("ribbon_dead_lettered_messages_total", {"reason": r}) or 0 for r in ERROR_CLASSES)
    offsets = [next(_offsets) for _ in values]
    ing._ingest([Msg(v, o) for v, o in zip(values, offsets)])  # raises nothing
    docs = {s.doc.offset for s in registry._seqs.values()} & set(offsets)
    dead = sum(get("ribbon_dead_lettered_messages_total", {"reason": r}) or 0 for r in ERROR_CLASSES) - dead_before
    assert len(docs) + dead == len(values)
    assert get("ribbon_dead_lettered_messages_total", {"reason": "internal_error"}) is None  # no bug was met
