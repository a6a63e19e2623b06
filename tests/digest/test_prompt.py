"""The prompt's facts block (worker/digest/prompt.py) on a labelled document."""

from __future__ import annotations

from worker.demo.samples import labelled
from worker.digest.prepared import PrepareOptions, prepare
from worker.digest.prompt import LOG_HEADER


def _prompt(kind: str) -> tuple[str, tuple[str, ...]]:
    s = labelled(kind, 0, 300, seed=7)
    p = prepare("\n".join(s.message["lines"]), s.message["source"], kind, PrepareOptions(0, True, 0.2, False))
    assert p.prompt is not None
    return p.prompt, s.faults


def test_the_facts_give_span_levels_failures_with_times_and_entities():
    prompt, faults = _prompt("nf")
    facts, _, log = prompt.partition(LOG_HEADER)
    lines = facts.splitlines()
    assert lines[0] == "Facts:"
    assert lines[1].startswith("- time: 2026-12-01 ") and lines[1].endswith(")") and " UTC (" in lines[1]
    assert lines[2].startswith("- lines: 300 (") and "ERROR" in lines[2]
    assert "- failures:" in lines
    for fault in faults:  # each injected fault: its time, its host and its message, without the stamp
        stamp, host, level, message = fault.split(" ", 3)
        entry = next(x for x in lines if message in x)
        assert entry.lstrip().split(" ", 2)[1] == stamp[11:19] and f'"{host} {message}"' in entry
        assert level in entry and stamp not in entry
    assert any(x.startswith("- elements: ") for x in lines)
    assert log.strip()  # the compacted log follows


def test_a_document_without_failures_says_so_and_keeps_its_outlier():
    prompt, _ = _prompt("pm_csv")
    facts = prompt.partition(LOG_HEADER)[0]
    assert "- failures: none" in facts and "Outlier: line" in facts


def test_the_demo_gives_a_real_model_on_a_cpu_a_handful_of_documents():
    from worker.config.settings import load_settings
    from worker.demo.run import default_documents

    real = load_settings(environ={}, overrides={"engine.device": "cpu"})
    tiny = load_settings(environ={}, overrides={"model.path": "tiny-random", "engine.device": "cpu"})
    assert default_documents(real) == (8, 3) and default_documents(tiny) == (200, 10)
