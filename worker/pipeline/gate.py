"""The publish gate: the model's text is published only when it beats the digest rendering.

    judge(text, document, digest, grounded=True) -> Verdict(source, reason, checks)

A model text passes when every check holds (`CHECKS`, in the order a failure is reported):
- `loop`: no run of tokens (words, numbers or punctuation alike) repeats back to back, by the
  engine's loop finder (worker/engine/loops.py: three times or more over eight tokens or more),
  nor is said twice when it is six tokens or more holding four distinct words ("[1] [1] [1]",
  ":00:00:00:00", a sentence said twice);
- `grounded`: something is left once sentences citing a time, number, address, path or
  identifier-shaped word found in neither the document nor its digest are dropped
  (worker/pipeline/grounding.py; only with generation.grounding = drop: `mark` and `off` publish
  such sentences on purpose);
- `copy`: it is not a near-verbatim copy of one input line (the words it shares with one line,
  in runs of three or more, are under COPY_SHARE of its words): a copied line is a highlight,
  and the output has those already;
- `content`: it holds at least MIN_CONTENT_WORDS content words (words of three or more letters
  that are not stop words or the prompt's own vocabulary, and identifiers): "The log is:" and
  "Theme:" say nothing;
- `fact`: it names a fact of the digest: when the digest has failures, one of them (two content
  words of a failure's pattern, or one and an identifier-shaped value of that failure's line);
  a PM file's failure counters and extremes count as its failures (a counter's name; an
  extreme's object or value); otherwise an entity, a variable's value, a counter, or two content
  words of a line template.
Otherwise the digest rendering is published, and the reason is the first check that failed.
Pure: no Kafka, no model, no shared state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from worker.engine.loops import loop_start
from worker.messages.levels import NAMES
from worker.pipeline.grounding import identifiers

CHECKS = ("loop", "grounded", "copy", "content", "fact")
MIN_CONTENT_WORDS = 4
COPY_SHARE = 0.6
COPY_LINES = 200  # distinct candidate lines compared in full, at most
_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]|[A-Za-z0-9]*\d[A-Za-z0-9_.:-]*")
_PLACEHOLDER = re.compile(r"<[^<>\s]{1,8}>")
_STOP = frozenset("""a an the and or but if of to in on at by for from with without into onto over under
this that these those there here it its is are was were be been being has have had do does did not no
as so than then also which who what when where while all any some each other such only same very can
could would should will may might must about after before during between within log logs line lines
following below above summary summarize theme text shows show describes described message messages
document entry entries event events record records output input given provided""".split())
_LEVELS = NAMES | {"errors", "warnings"}  # level words name no fact of their own


@dataclass(frozen=True)
class Verdict:
    source: str                      # "model" | "digest"
    reason: str                      # "passed", or the first check that failed (CHECKS)
    checks: dict[str, bool] = field(default_factory=dict)  # every check's result (the benchmark's shares)

    def as_dict(self) -> dict:
        return {"source": self.source, "reason": self.reason}


def tokens(text: str) -> list[str]:
    """Words, numbers and single punctuation marks, lower-cased: what the loop check compares."""
    return [t.lower() for t in _TOKEN.findall(text)]


def loops(text: str) -> bool:
    """The `loop` check's finding: the text's tokens loop (see the module docstring)."""
    return loop_start(tokens(text), twice=_sentence) is not None


def _sentence(unit: list[str]) -> bool:
    """A run said twice is a loop when it reads as a sentence: four distinct words or more."""
    return _words_in(unit) >= 4


def _words_in(toks: list[str]) -> int:
    return len({t for t in toks if t[0].isalnum()})


def content_words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text):
        low = w.lower().strip(".:-")
        if any(c.isdigit() for c in low) or (len(low) >= 3 and low not in _STOP):
            out.append(low)
    return out


def copied_line(text: str, document: str) -> bool:
    """Whether the text is a near-verbatim copy of one line of the document. Lines are looked at in three
    passes, each cheaper than the next: two of the text's five longest words, then COPY_SHARE of its words,
    then the runs it shares with the line (at most COPY_LINES distinct lines get that far)."""
    mine = tokens(text)
    words = [t for t in mine if t[0].isalnum()]
    if len(words) < 3:
        return False
    have = set(words)
    longest = sorted(have, key=len, reverse=True)[:5]
    need = min(2, len(longest))
    # A line holds only words the whole document holds (a line lower-cased is that piece of the document
    # lower-cased): one look at the document rules out most texts without reading its lines one by one.
    whole = document.lower()
    if sum(w in whole for w in longest) < need:
        return False
    candidates: dict[str, None] = {}
    for line in document.splitlines():
        low = line.lower()
        if sum(w in low for w in longest) >= need and sum(w in low for w in have) >= COPY_SHARE * len(have):
            candidates[low] = None
            if len(candidates) >= COPY_LINES:
                break
    for low in candidates:
        theirs = tokens(low)
        blocks = SequenceMatcher(None, mine, theirs, autojunk=False).get_matching_blocks()
        shared = sum(sum(t[0].isalnum() for t in mine[b.a:b.a + b.size]) for b in blocks if b.size >= 3)
        if shared >= COPY_SHARE * len(words):
            return True
    return False


def _pattern_words(pattern: str) -> set[str]:
    return {w for w in content_words(_PLACEHOLDER.sub(" ", pattern)) if w not in _LEVELS and not w[0].isdigit()}


def _shaped(value: str) -> bool:
    """An identifier-shaped value (a digit, a separator or CamelCase), not a plain or level word."""
    return len(value) >= 3 and (any(not c.isalpha() for c in value) or value[1:] != value[1:].lower()) \
        and value.lower() not in _LEVELS


def _values(t: dict) -> set[str]:
    """Identifier-like values of a template: its example line's identifiers and its variables' top values."""
    vals = {i for i in identifiers(t.get("example") or "") if _shaped(i)}
    for v in t.get("variables") or []:
        vals.update(str(x["value"]) for x in v.get("top") or [] if _shaped(str(x["value"])))
    return {v.lower() for v in vals}


def _pm_faults(digest: dict) -> list[set[str]]:
    """A PM file's faults, each as the values that name it: a failure counter (its name), an extreme (its
    object, the object's last part, or its value)."""
    pm = digest.get("pm") or {}
    out = [{str(c["name"]).lower()} for c in pm.get("failure_counters") or [] if c.get("total")]
    for e in pm.get("extremes") or []:
        obj, value = str(e.get("object", "")).lower(), e.get("value")
        names = {obj, obj.rsplit(",", 1)[-1]}
        if isinstance(value, (int, float)):
            names.add(f"{value:g}")
        out.append({n for n in names if n})
    return out


def _names(t: dict, words: set[str], low: str) -> bool:
    pw = _pattern_words(t.get("pattern") or "")
    hits = len(pw & words)
    if pw and hits >= min(2, len(pw)):
        return True
    return hits >= 1 and any(_cited(v, low) for v in _values(t))


def _cited(value: str, low: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", low) is not None


def _digest_values(digest: dict) -> Iterable[str]:
    for e in digest.get("entities") or []:
        yield str(e["value"]).lower()
    for o in digest.get("outliers") or []:
        yield str(o["name"]).lower()
    pm = digest.get("pm") or {}
    for key in ("nonzero", "failure_counters"):
        for c in pm.get(key) or []:
            yield str(c["name"]).lower()
            yield str(c["max_object"]).lower()
    if pm.get("managed_element"):
        yield str(pm["managed_element"]).lower()
    for t in digest.get("templates") or []:
        yield from _values(t)


def names_fact(text: str, digest: dict | None) -> bool:
    """Whether the text names a failure of the digest (when it has any), else any fact of it."""
    if not digest:
        return True  # nothing to name (a document without a digest)
    low = text.lower()
    words = set(content_words(text))
    failures, pm_faults = digest.get("failures") or [], _pm_faults(digest)
    if failures or pm_faults:
        return any(_names(t, words, low) for t in failures) or any(any(_cited(v, low) for v in f) for f in pm_faults)
    if any(len(v) >= 3 and _cited(v, low) for v in _digest_values(digest)):
        return True
    return any(_names(t, words, low) for t in digest.get("templates") or [])


def judge(text: str, document: str, digest: dict | None, grounded: bool = True) -> Verdict:
    """The gate's verdict on a model text (already through the grounding check: `grounded` False when
    generation.grounding = drop left nothing of it)."""
    checks = {
        "content": len(content_words(text)) >= MIN_CONTENT_WORDS,
        "loop": not loops(text),
        "copy": not copied_line(text, document),
        "grounded": grounded,
        "fact": names_fact(text, digest),
    }
    failed = next((c for c in CHECKS if not checks[c]), None)
    return Verdict("digest" if failed else "model", failed or "passed", checks)
