"""The Loghub-2.0 template metrics (GA, PA, FGA, FTA), defined as logpai/loghub-2.0's evaluator defines them.

Written from the definitions in Jiang et al., "A Large-scale Evaluation for Log Parsing Techniques: How
Far Are We?" (ISSTA 2024) and the benchmark's evaluator (evaluation/utils: GA_calculator, PA_calculator,
template_level_analysis, evaluator_main), not copied from it:

- Both sides are aligned with the line's Content first: a `<*>` that matches the empty string in that
  line is dropped from its template (the evaluator's `align_with_null_values`). The ground truth is then
  generalized (`correct_template_general`: `<*>.<*>`, `<*><*>`, `<*>:<*>` and `<*> <*>` become `<*>`,
  repeatedly); a parser's template is not.
- Lines group by template *text* on both sides (two parser groups with one text are one group).
- GA: the share of lines whose true group is exactly one parser group, holding no other line.
- FGA: the F1 of that per template: precision over parser groups, recall over true groups.
- PA: the share of lines whose parser template equals their true template, character for character.
- FTA: the F1 over parser groups whose lines all carry one true template equal to the group's text.

`post_process` is the parser side's template normalization of the benchmark (every parser's output goes
through it there: `correct_single_template`): whitespace runs single, path-like tokens, booleans and
`null`/`root`/`admin`, all-digit tokens and a word glued to a variable become `<*>`, and runs of variables
separated by `.` `:` `#` `/` `@`, a space-less run, or quotes around one, become one `<*>`. Ribbon and
Drain3 go through it alike (`python -m bench.quality`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

_STAR = "<*>"
_PATH_SPLIT = re.compile(r"(\s|,|!|;|:|=|\||\"|'|\[|\]|\(|\)|\{|\})")
_TOKEN_SPLIT = re.compile(r"(\s|,|!|;|:|=|\||\"|'|\[|\]|\(|\)|\{|\}|\.|-|\+|@|#|\$|%|&)")
_PATH = re.compile(r"^(/[^/]+)+$")
_DIGITS = re.compile(r"^\d+$")
_GLUED = re.compile(r"^[^\s/]*<\*>[^\s/]*$")
_WORDS = {"true", "false", "null", "root", "admin"}


def _until_stable(text: str, *pairs: tuple[str, str]) -> str:
    while True:
        before = text
        for old, new in pairs:
            text = text.replace(old, new)
        if text == before:
            return text


def general_correction(template: str) -> str:
    """The evaluator's generalization of a true template: adjacent variables joined by `.`, `:`, a space
    or nothing are one."""
    t = _until_stable(template, ("<*>.<*>", _STAR))
    return _until_stable(t, ("<*><*>", _STAR), ("<*>:<*>", _STAR), ("<*> <*>", _STAR))


def post_process(template: str) -> str:
    """A parser template in the benchmark's normal form (the parser-side rules: see the module doc)."""
    t = " ".join(template.split())
    t = "".join(_STAR if _PATH.match(p) else p for p in _PATH_SPLIT.split(t))
    out = []
    for tok in _TOKEN_SPLIT.split(t):
        if tok.lower() in _WORDS or _DIGITS.match(tok) or (_GLUED.match(tok) and tok != "<*>/<*>"):
            tok = _STAR
        out.append(tok)
    t = _until_stable("".join(out), ("<*>.<*>", _STAR))
    t = _until_stable(t, ("<*><*>", _STAR))
    return _until_stable(t, (" #<*># ", " <*> "), (" #<*> ", " <*> "), ("<*>:<*>", _STAR), ("<*>#<*>", _STAR),
                         ("<*>/<*>", _STAR), ("<*>@<*>", _STAR), ("<*>.<*>", _STAR), (' "<*>" ', " <*> "),
                         (" '<*>' ", " <*> "), ("<*><*>", _STAR))


def align(content: str, template: str) -> str:
    """The template with every `<*>` that matches nothing in this content dropped (kept as is when the
    template does not match the content at all)."""
    if _STAR not in template:
        return template
    parts = template.split(_STAR)
    m = re.match("^" + "(.*?)".join(map(re.escape, parts)) + "$", content, re.S)
    if m is None:
        return template
    out = [parts[0]]
    for value, part in zip(m.groups(), parts[1:]):
        out.append(_STAR if value else "")
        out.append(part)
    return "".join(out)


def truth_templates(contents: list[str], templates: list[str]) -> list[str]:
    """The ground truth as the evaluator compares it: aligned with each line, then generalized."""
    return [general_correction(align(c, t)) for c, t in zip(contents, templates)]


def parsed_templates(contents: list[str], templates: list[str]) -> list[str]:
    """A parser's templates as the evaluator compares them: aligned with each line."""
    return [align(c, t) for c, t in zip(contents, templates)]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def grouping(truth: list[str], parsed: list[str]) -> tuple[float, float]:
    """(GA, FGA) of parser templates against true templates, one per line."""
    parsed_size = Counter(parsed)
    by_truth: dict[str, list[str]] = defaultdict(list)
    for t, p in zip(truth, parsed):
        by_truth[t].append(p)
    right_lines = right_groups = 0
    for members in by_truth.values():
        kinds = set(members)
        if len(kinds) == 1 and parsed_size[members[0]] == len(members):
            right_lines += len(members)
            right_groups += 1
    n = max(1, len(truth))
    return right_lines / n, _f1(right_groups / max(1, len(parsed_size)), right_groups / max(1, len(by_truth)))


def parsing_accuracy(truth: list[str], parsed: list[str]) -> float:
    return sum(t == p for t, p in zip(truth, parsed)) / max(1, len(truth))


def template_accuracy(truth: list[str], parsed: list[str]) -> float:
    """FTA: F1 of parser templates whose lines all carry one true template equal to the parser's text."""
    by_parsed: dict[str, set[str]] = defaultdict(set)
    for t, p in zip(truth, parsed):
        by_parsed[p].add(t)
    right = sum(trues == {p} for p, trues in by_parsed.items())
    return _f1(right / max(1, len(by_parsed)), right / max(1, len(set(truth))))


def metrics(contents: list[str], true_templates: list[str], parser_templates: list[str]) -> dict:
    """GA, PA, FGA, FTA and template counts of one system's parse, line by line."""
    truth = truth_templates(contents, true_templates)
    parsed = parsed_templates(contents, parser_templates)
    ga, fga = grouping(truth, parsed)
    return {"ga": round(ga, 4), "pa": round(parsing_accuracy(truth, parsed), 4), "fga": round(fga, 4),
            "fta": round(template_accuracy(truth, parsed), 4), "templates": len(set(parsed)),
            "true_templates": len(set(truth))}
