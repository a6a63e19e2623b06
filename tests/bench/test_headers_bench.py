"""Header detection figures (bench/headers.py): per-format precision and recall, macro over formats."""

from __future__ import annotations

import json

from bench import headers
from bench.quality import HEADERS_KEY, main


def _corpus(tmp_path):
    records = [
        {"format": "a", "line": "2026-03-02T10:00:00Z edge-1 ERROR link down",
         "expect": {"timestamp": "2026-03-02T10:00:00Z", "level": "ERROR", "host": "edge-1", "message": "link down"}},
        {"format": "a", "line": "2026-03-02T10:00:01Z edge-1 ERROR link up",
         "expect": {"timestamp": "2026-03-02T10:00:01Z", "host": "edge-2"}},
        {"format": "b", "line": "plain words without a header", "expect": {"level": "INFO"}},
        {"format": "c", "line": "no assertion here"},
    ]
    (tmp_path / "formats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def test_precision_and_recall_per_format_and_macro(tmp_path):
    res = headers.measure(_corpus(tmp_path))
    a, b = res["per_format"]["a"], res["per_format"]["b"]
    assert a["host"] == {"asserted": 2, "precision": 0.5, "recall": 0.5}
    assert a["timestamp"]["recall"] == 1.0 and a["message"]["recall"] == 1.0
    assert b["level"] == {"asserted": 1, "precision": None, "recall": 0.0}
    assert res["total"]["level"]["recall"] == 0.5 and res["total"]["level"]["formats"] == 2
    assert "c" not in res["per_format"] and res["records"] == 4


def test_headers_only_rewrites_its_key_and_keeps_the_others(tmp_path):
    out = tmp_path / "quality.json"
    out.write_text(json.dumps({"devlogs": {"x": 1}}))
    assert main(["--headers-only", "--formats", str(_corpus(tmp_path)), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["devlogs"] == {"x": 1} and res[HEADERS_KEY]["total"]["host"]["recall"] == 0.5
    assert main(["--headers-only", "--formats", str(tmp_path / "missing"), "--out", str(out)]) == 2
