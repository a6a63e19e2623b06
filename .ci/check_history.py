"""Docs, docstrings and comments describe the code as it is, not how it came to be (`make lint`).

The rule: outside docs/history.md (the one place for history), no phrase of WORDS appears in
README.md, bench/RESULTS.md, docs/*.md, or a docstring or comment of the Python under worker/,
bench/, tests/ and .ci/. Each phrase narrates a change ("no longer", "used to", "(was `x`)",
"now" as in "now does y"); say what the code does instead, and put the story in docs/history.md.
`now` is allowed in a code span (`now`, the clock reading) and in "now and then"; "is used to"
(a purpose) is not history. This file's own text is exempt (it names the phrases). Exit 1 naming
each line.
"""

from __future__ import annotations

import re
import sys

from prose import ROOT, docs, prose_of_python, python_files

EXEMPT = ("docs/history.md", ".ci/check_history.py")

# Phrases that narrate a change, matched case-insensitively on word boundaries.
WORDS = (
    r"now (?!unless\b|as\b|its\b|this\b|and then\b)\w+(?:s|ed)",  # "the packer now decides", "are now found"
    r"(?:is|are|has|have|does|do|was|were) now",
    r"previously", r"formerly", r"originally", r"used to be",
    r"(?<!is )(?<!are )(?<!be )(?<!been )(?<!being )used to",  # "X used to do Y"; "is used to" is a purpose
    r"\(was", r"was (?:renamed|replaced|removed|added|moved|split|merged)", r"a round ago", r"last round",
    r"before this (?:change|rule|fix|commit|issue)", r"until (?:now|recently)", r"these days",
    r"the old (?:path|code|way|name|rule|default|behaviou?r|layout|setting)s?",
)
PATTERN = re.compile(r"(?<!\w)(?:%s)\b" % "|".join(WORDS), re.IGNORECASE)
CODE_SPAN = re.compile(r"`[^`]*`")


def hits(text: str) -> list[str]:
    """The history phrases in `text`, code spans left out."""
    return [m.group(0) for m in PATTERN.finditer(CODE_SPAN.sub("``", text))]


def main() -> int:
    bad = 0
    for path in docs() + python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel in EXEMPT:
            continue
        text = path.read_text(encoding="utf-8")
        lines = enumerate(text.splitlines(), 1) if path.suffix == ".md" else prose_of_python(text)
        for n, line in lines:
            for word in hits(line):
                print(f"{rel}:{n}: history phrase {word!r}: describe the code as it is "
                      f"(the story goes in docs/history.md)")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
