"""Issue 37 item 4: failures an operator means, and a "Commonest" that always names something."""

from __future__ import annotations

import re

from worker.digest.document import analyze_document
from worker.digest.render import MAX_PATTERN_CHARS, render

_REGISTERS = ("instruction address", "machine state register", "core configuration register", "link register",
              "count register", "exception syndrome register", "debug status register",
              "general purpose register", "floating point status register")


def _burst_then_one_liners() -> str:
    lines = [f"2026-12-01T10:00:{i:02d}Z node-7 FATAL data storage interrupt" for i in range(30)]
    lines += [f"2026-12-01T10:01:{i:02d}Z node-7 FATAL {name}: 0x{i + 10:08x}" for i, name in enumerate(_REGISTERS)]
    lines += [f"2026-12-01T10:02:{i:02d}Z node-7 INFO heartbeat ok seq={i}" for i in range(5)]
    return "\n".join(lines)


def _quoted(summary: str, label: str) -> list[str]:
    return re.findall(label + r' "([^"]*)"', summary)


def test_a_burst_ranks_before_one_line_failures_of_its_level():
    a = analyze_document(_burst_then_one_liners())
    first = a.digest["failures"][0]
    assert first["count"] == 30 and "data storage interrupt" in first["pattern"]
    assert "data storage interrupt" in render(a.digest, "node-7", "log").split("Commonest")[0]


def test_a_failure_template_is_never_the_commonest():
    lines = [f"2026-12-01T10:00:{i % 60:02d}Z amf-1 WARN retrying request to peer-{i % 3} attempt={i % 4}"
             for i in range(50)]
    lines += [f"2026-12-01T10:01:{i:02d}Z amf-1 INFO heartbeat ok seq={i}" for i in range(20)]
    text = render(analyze_document("\n".join(lines)).digest, "amf-1", "log")
    commonest = _quoted(text, "Commonest:")
    assert commonest and "retrying" not in commonest[0] and "heartbeat ok" in commonest[0]
    assert "retrying request" in text.split("Commonest")[0]


def test_the_commonest_names_an_example_when_its_template_is_all_placeholders():
    lines = [f"0x{i * 7919:08x} {1000 + i * 37} 10.0.{i}.{i + 1}" for i in range(12)]
    text = render(analyze_document("\n".join(lines)).digest, "probe", "log")
    commonest = _quoted(text, "Commonest:")
    assert commonest and commonest[0].strip() and re.search(r"\d", commonest[0])
    assert commonest[0] in lines[0]


def test_a_quoted_template_is_never_cut_inside_a_value():
    url = "https://storage.example.org/buckets/telemetry-archive-2026/objects/segment-000417.parquet"
    line = f"2026-12-01T10:00:00Z api-3 ERROR upstream fetch of {url} failed after retries"
    text = render(analyze_document(line + "\n2026-12-01T10:00:05Z api-3 INFO ok").digest, "api-3", "log")
    quoted = _quoted(text, "ERROR")
    assert quoted
    shown = quoted[0]
    assert len(shown) <= MAX_PATTERN_CHARS + len(url)
    if shown.endswith("…"):
        assert url in shown or not any(url.startswith(tok) for tok in shown[:-1].split()[-1:] if len(tok) > 8)
    assert url in shown or "https" not in shown
