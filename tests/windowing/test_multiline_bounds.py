"""An endless multiline event: its continuation lines count against the window's bounds, close it at
twice them, and are joined in time linear in the text (sizes here would take minutes if quadratic)."""

from worker.windowing.multiline import Joiner
from worker.windowing.windows import Rules, Windower

TP = ("lines", 0)


def _windower(**kw) -> Windower:
    rules = {"gap_s": 10.0, "max_length_s": 60.0, "max_lines": 100, "max_bytes": 1 << 30, "max_open_s": 300.0}
    rules.update(kw)
    return Windower(Rules(**rules), clock=lambda: 1000.0)


def test_an_endless_event_closes_its_window_at_twice_max_lines_and_every_record_lands_once():
    w = _windower(max_lines=100)
    closed = w.add(TP, 1, "k", 0, "java.lang.IllegalStateException: boom")
    n = 50_000
    for off in range(1, n + 1):
        closed += w.add(TP, 1, "k", off, f"\tat a.B.c{off}(B.java:{off})")
    closed += w.flush()
    assert max(x.records for x in closed) <= 200
    assert {x.reason for x in closed[:-1]} == {"max_lines"}
    offsets = [o for x in closed for o in x.offsets]
    assert offsets == list(range(n + 1))
    assert closed[0].text().startswith("java.lang.IllegalStateException: boom\n\tat a.B.c1(")


def test_an_endless_event_closes_its_window_at_twice_max_bytes():
    w = _windower(max_lines=1_000_000, max_bytes=10_000)
    closed = w.add(TP, 1, "k", 0, "panic: boom")
    for off in range(1, 20_001):
        closed += w.add(TP, 1, "k", off, "\t" + "x" * 99)
    assert closed and all(x.reason == "max_bytes" and x.size <= 2 * 10_000 + 101 for x in closed)
    assert w.held_bytes <= 2 * 10_000 + 101


def test_a_continuation_still_joins_a_full_window_below_twice_its_bounds():
    w = _windower(max_lines=3)
    for off, line in enumerate(["Exception in main", "\tat a(A.java:1)", "\tat b(B.java:2)", "\tat c(C.java:3)"]):
        assert w.add(TP, 1, "k", off, line) == []
    (closed,) = w.add(TP, 1, "k", 4, "INFO next")
    assert closed.reason == "max_lines" and closed.offsets == [0, 1, 2, 3]


def test_joining_300k_continuation_lines_is_linear():
    """300,000 lines of 60 bytes: a string grown per line copies ~2.7 TB; kept and joined once, 18 MB."""
    j = Joiner()
    j.add("panic: runtime error")
    line = "\t/src/pkg/" + "y" * 50
    for _ in range(300_000):
        assert j.add(line)
    assert j.lines == 300_001 and j.event_count == 1
    text = j.text()
    assert len(text) == len("panic: runtime error") + 300_000 * (len(line) + 1)
    assert text.count("\n") == 300_000
