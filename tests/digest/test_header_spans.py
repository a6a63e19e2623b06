"""header_rows.recipe's fields: per field the span of its first group that matched text, read from one call for
all the fields' groups; it must give what reading each group's span in turn gives (host, program and pid none
where the line has no header)."""

from __future__ import annotations

from tests.digest.test_header_cache import LINES, _shared_lines

from worker.digest import header_rows
from worker.digest.header import HEADER

_NONE = (0, 0)


def _reference(m, key: str) -> list[tuple[int, int]]:
    out = []
    for groups in header_rows._GROUPS:
        for g in groups:
            a, b = m.span(g)
            if b > a:
                out.append(_NONE if key[a:b] == "-" else (a, b))
                break
        else:
            out.append(_NONE)
    if out[0] == out[4] == _NONE and not m.group("pri"):      # no header: host, program and pid none
        out[1:4] = [_NONE] * 3
    return out


def _fields(key: str) -> list[tuple[int, int]]:
    return list(header_rows.recipe(key)[:5])


def test_each_group_stands_for_one_field():
    groups = [g for field in header_rows._GROUPS for g in field]
    assert len(groups) == len(set(groups)) and header_rows._FIRSTS[:5] == header_rows._GROUPS


def test_a_dash_field_is_none_and_the_first_matched_group_of_a_field_wins():
    key = header_rows.shape_key("<13>1 2026-03-02T10:00:00.117Z - app - ID47 - message")
    m = HEADER.match(key)
    assert _fields(key) == _reference(m, key)
    assert _fields(key)[1] == _NONE and _fields(key)[3] == _NONE    # host `-`, pid `-`


def test_spans_read_as_each_group_in_turn_over_the_sample_and_shared_lines():
    lines = LINES + _shared_lines()
    for line in lines:
        key = header_rows.shape_key(header_rows._digits(line))
        m = HEADER.match(key)
        assert _fields(key) == _reference(m, key), line
