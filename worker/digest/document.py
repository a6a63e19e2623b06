"""One document's analysis from its text: structured forms, the format layer, the templater, the digest.

    analyze_document(text, lines=None) -> Analysis

An OTLP/JSON logs export becomes its records as lines; a 3GPP PM XML file gets a counter digest
(`digest.pm`) besides its line digest. Then the format layer (formats.read) takes the headers off,
the templater (templates.analyze_text) runs over the messages, and build_digest reads levels, times
and hosts from the headers. Examples, highlights and compaction quote the cleaned lines (escape
sequences removed), never the messages alone.
"""

from __future__ import annotations

from worker.digest.digest import Analysis, build_digest
from worker.digest.formats import read
from worker.digest.structured import otlp_lines, pm_digest, pm_span
from worker.digest.templates import analyze_text


def analyze_document(text: str, lines: list[str] | None = None) -> Analysis:
    records = otlp_lines(text) if text[:1] == "{" or text.lstrip()[:1] == "{" else None
    if records is not None:
        text, lines = "\n".join(records), records
    r = read(text, lines)
    tm = analyze_text("\n".join(r.texts) if r.form is not None or r.cleaned else text, r.lines)
    a = build_digest(tm, r)
    if "measCollecFile" in text[:4096] or "measDataFile" in text[:4096]:
        a.digest["pm"] = pm_digest(text)
        if a.digest["pm"] is not None:   # a PM file's period is its span, whatever times its lines hold
            a.digest["span"] = pm_span(a.digest["pm"]) or a.digest["span"]
    return a
