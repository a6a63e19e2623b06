"""The necessary-condition shortcuts of the template level readers agree with the readers they spare.

levels.level_of_pattern answers None, without reading tokens, for an ASCII pattern with no level word as a whole
letter run and no logcat tag; failures.keyword_level answers None for a pattern with no failure word's letters
as a whole letter run. Each is checked against its full reading (levels.tokens_level, failures.words_level)
over patterns built from every kind of piece that decides them: level and failure words in every case, brackets,
`:`, `'`, the token delimiters, the characters _WORD looks at around a word, logcat tags, placeholders,
non-ASCII letters (the Kelvin sign and dotted I, which lower-case to ASCII letters) and more than FIRST_TOKENS
tokens.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.digest.failures import HARD, SOFT, _NEGATION, keyword_level, words_level
from worker.digest.levels import LEVEL_WORDS, letter_runs, level_of_pattern, tokens_level

_WORDS = sorted(LEVEL_WORDS) + sorted(HARD | SOFT) + sorted(_NEGATION) + [
    "errorx", "xerror", "err_count", "info1", "fail", "can", "couldn", "t", "s", "warn's", "a", "E", "W", "I"]
_CASES = (str.lower, str.upper, str.title, lambda w: w[:1].lower() + w[1:].upper())
_OPEN = ("", "[", "<", "[[", ":", "<[", "(", "'", "\"", "/", "-", ".", "=", "_", "1", "x", "\u212a", "\u0130", "é")
_CLOSE = ("", "]", ">", ":", "]:", ":x", "x", "_", "1", "-", "=", ".", "./", ".x", "'", "'s", "'=", "/", "\u212a",
          "é", ":<n>", ": <n>", "=<n>")
_GLUE = (" ", "  ", "=", ";", ",", "(", ")", "|", "{", "}", "\t", ".", "/", "-", "'", ": ", " <n> ", " <*> ",
         "\u00a0", "\u2003")
_EXTRA = ("E/Tag", "W/x", "e/x", "X/y", "/E/x", "[E/x]", "I/", "V/a:b", "<n>", "<*>", "<ts>", "<ip>", "x=E/y", "a", "b")


def _pieces(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return rng.choice(_EXTRA)
    word = rng.choice(_CASES)(rng.choice(_WORDS))
    return rng.choice(_OPEN) + word + rng.choice(_CLOSE)


def _patterns(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        parts = [_pieces(rng) for _ in range(k)]
        out.append("".join(p + rng.choice(_GLUE) for p in parts).rstrip() if rng.random() < 0.5
                   else "<ts> <*> " + " ".join(parts))
    return out


_SINGLES = [o + c(w) + e for w in sorted(set(LEVEL_WORDS) | HARD | SOFT) for c in _CASES for o in _OPEN for e in _CLOSE]


@pytest.mark.parametrize("pattern", ["<ts> <*> ERROR S1 link down", "E/ActivityManager: crash", "[Error] x",
                                     "x=E/y", "a b c d e f g h ERROR", "WARN\u212a", "\u0130NFO x", "err'=1",
                                     "couldn't connect", "can't", "failed'=x", "no errors found", "error_count=<n>"])
def test_the_shortcuts_agree_on_named_patterns(pattern):
    assert level_of_pattern.__wrapped__(pattern) == tokens_level(pattern)
    assert keyword_level.__wrapped__(pattern) == words_level(pattern)


def test_the_shortcuts_agree_on_every_single_word_shape():
    """Every level and failure word in every case between every opening and closing piece, alone and in a
    pattern's head."""
    for word in _SINGLES:
        for pattern in (word, "<ts> " + word, word + " x"):
            assert level_of_pattern.__wrapped__(pattern) == tokens_level(pattern), pattern
            assert keyword_level.__wrapped__(pattern) == words_level(pattern), pattern


def test_the_shortcuts_agree_on_generated_patterns():
    patterns = _patterns(20000, seed=37)
    levels = [tokens_level(p) for p in patterns]
    keywords = [words_level(p) for p in patterns]
    assert [level_of_pattern.__wrapped__(p) for p in patterns] == levels
    assert [keyword_level.__wrapped__(p) for p in patterns] == keywords
    # the generated patterns hold both answers: patterns with a level and with none, a failure word and none
    assert sum(v is None for v in levels) and sum(v is not None for v in levels)
    assert sum(v is None for v in keywords) and sum(v is not None for v in keywords)


def test_the_logcat_tag_shortcut_agrees_with_every_delimiter_before_it():
    for glue, letter in itertools.product(_GLUE + ("", "x", "1", "_"), "VDIWEFAXvde"):
        pattern = f"a{glue}{letter}/Tag: x"
        assert level_of_pattern.__wrapped__(pattern) == tokens_level(pattern), pattern


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from([*"ErRoWaNnIfFdDgEe/[]<>:'=._- 1\u212a\u0130\t", "error", "WARN", "failed", "E/"]),
                max_size=30).map("".join))
def test_the_shortcuts_agree_on_any_text_of_their_pieces(text):
    assert level_of_pattern.__wrapped__(text) == tokens_level(text)
    assert keyword_level.__wrapped__(text) == words_level(text)


def test_letter_runs():
    assert letter_runs("[ERROR]: x=1 can't Fail_ré\u212a") == [b"error", b"x", b"can", b"t", b"fail", b"r"]
