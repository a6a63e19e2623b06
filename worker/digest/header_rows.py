"""The header grammar's fields of every line of a document, each line read once per shape of its digits and ids.

    shape_key(text) -> the text with its digits written 0 and its hex ids in one form per length and
                       leading digits (what a parse is kept under; ext/core/shape_key.hpp)
    recipes(keys) -> per key its recipe (the parse kept for it): the core's for ASCII keys, recipe()'s (Python,
                     the reference) for the rest
    columns(text, lines) -> Columns: per line its timestamp, host, program, pid, level token and
                            level, PRI, message (and the body the templater reads: the message with
                            the header's fields and trailer), whether a header was found, whether it
                            continues the record before it (worker/multiline.py; a line whose header
                            holds a time starts a record, indented or not)

The grammar (worker/digest/header.py) holds no literal digit: every digit it reads, it reads as
`\\d` or in a class holding all ten. A hex id (a run of [0-9a-f] of 8 or more holding a digit and a
letter, or a uuid, with no word character on either side; request ids, hashes) is read by classes only:
no level word or month the grammar spells is made of lower-case hex letters alone, and a level word ends
before a non-word character. A line therefore parses exactly as its key does, field for field at the same
offsets (tests/digest/test_header_cache.py checks both over every line of the development logs and
formats); the parse of that key (where each field starts and ends) is kept (`_RECIPES`, cleared when
full) and applied to each line of that key by slicing. A line is looked up first by its digits written 0
(one translation of the whole document); where that misses, by its whole key (the C++ core, one call for
all such lines of the document); the whole keys with no parse kept are read in one more call: for an ASCII
key the core matches the grammar with PCRE2's JIT and builds the whole recipe (ext/core/header_recipe.cpp: the
patterns recipe() reads, spelt for PCRE2 by worker/digest/header_jit.py; the level by _level, Python's level
table); the other keys are read by recipe() (Python's re), the same tuple either way
(tests/digest/test_header_recipe.py). Lines that differ only in their numbers (most of a log) cost one
dictionary look-up, lines that differ in their ids as well a share of that call and two; the result of a line
depends on the line alone, never on the lines or documents read before it.
"""

from __future__ import annotations

import functools
from collections import Counter
from operator import itemgetter

from worker import _core
from worker.digest import header_jit
from worker.digest.header import EXTRA_LEVELS, HEADER, LEVEL_GROUPS, REQUEST, STATUS, TRAILER, level_token
from worker.messages.levels import level_word
from worker.multiline import CONTINUATION

RECIPES_MAX = 32768
MAX_KEY = 1024            # longer lines are read without keeping their parse
_ZERO = bytes.maketrans(b"123456789", b"0" * 9)   # on UTF-8 bytes (an ASCII digit is never inside a character)
_ZERO_TEXT = str.maketrans("123456789", "000000000")
_RECIPES: dict[str, tuple] = {}

_TS = ("ts", "ts5", "tsk", "tsr", "tse")
_HOST = ("host5", "host", "hostc", "hosts", "hostg", "hostl", "hostq", "hostk", "node")
_PROG = ("prog5", "prog", "progp", "progg")
_PID = ("pid5", "pid", "pidn", "pidp", "pidr", "pidg", "pidl", "pidq", "pidz")
_NONE = (0, 0)
_BY_STATUS = {"1": "INFO", "2": "INFO", "3": "INFO", "4": "WARN", "5": "ERROR"}
_PRI, _PRE, _MSG, _FIELDS, _V5, _HOSTC, _HOSTS = (HEADER.groupindex[n] for n in ("pri", "pre", "msg", "fields", "v5",
                                                                                  "hostc", "hosts"))
_GROUPS = tuple(tuple(HEADER.groupindex[n] for n in names) for names in (_TS, _HOST, _PROG, _PID, LEVEL_GROUPS))
# what a parse reads (header_jit.read): per field its first group that matched text, the text of five groups,
# the starts of two
_FIRSTS = (*_GROUPS, (_V5,), (_PRI,), (_HOSTC,), (_HOSTS,), (_PRE,))
_STARTS = (_MSG, _FIELDS)
_HAS_HOST, _HAS_STATUS, _HAS_PRI, _HAS_PIECES, _HAS_BODY = 1, 2, 4, 8, 16   # a recipe's `has` bits
_continues = CONTINUATION.match          # worker/multiline.py's continues(), without its call


@functools.lru_cache(maxsize=1024)
def _level(token: str) -> str | None:
    """The normalized level of a level token (`[warn ]`, `local.INFO`, `E`, `LOG`), or None."""
    word = level_token(token)
    return (level_word(word) or EXTRA_LEVELS.get(word)) if word else None


def recipe(key: str, read: tuple | None = None) -> tuple:
    """(ts, host, program, pid, token, level, pri, message pieces, matched, shape, continues, status, body
    pieces, has) of a line with its digits written 0: spans, the normalized level, the pieces its message is
    made of, where an access log's status code starts (-1: none), the pieces of what the templater reads
    where it holds more than the message (the header's fields and trailer; None: the message), and which of
    host, status, PRI, a message other than one piece to the line's end, body pieces it has (_HAS_* bits).

    A field's span (_GROUPS: ts, host, program, pid, level token) is that of its first group that matched
    text, (0, 0) where none did or that text is `-`. `read`: the key's reading of _FIRSTS and _STARTS
    (header_jit; None: read here by HEADER, Python's re). The reference: recipes() reads an ASCII key in the
    core, this for the rest."""
    ts, host, prog, pid, tok, v5, pri, hostc, hosts, pre, at, fields_at = (
        read if read is not None else header_jit.read_re(key, _FIRSTS, _STARTS))
    ts, host, prog, pid, tok = (s if s is not None and key[s[0]:s[1]] != "-" else _NONE
                                for s in (ts, host, prog, pid, tok))
    level = _level(key[tok[0]:tok[1]]) if tok is not _NONE else None
    body = None
    if ts is not _NONE or tok is not _NONE or pri:
        matched = True
        head = (pre,) if pre and len(key[pre[0]:pre[1]].split()) > 1 else ()   # one leading column (a label,
        end = TRAILER.search(key, at) if key[-1:] == ")" else None              # a record number) is dropped
        pieces = head + ((at, end.start() if end else None),)
        if end is not None or -1 < fields_at < at:
            body = head + ((fields_at, None),)
        if body is None and not "".join(key[a:b] for a, b in pieces).strip():
            head, pieces = (), ((0, None),)   # a header and nothing after it: the line is its own message
        has = ((_HAS_HOST if host is not _NONE else 0) | (_HAS_PRI if pri else 0)
               | (_HAS_PIECES if head or end is not None else 0) | (_HAS_BODY if body is not None else 0))
        # the line's header shape: what the digest names its `format` (the commonest among the lines)
        if v5:
            shape = "rfc5424"
        elif prog is not _NONE and (pri or host is not _NONE) or hostc or hosts:
            shape = "rfc3164"
        elif ts is not _NONE:
            s = key[ts[0]:ts[1]]
            shape = "access" if s[2:3] == "/" and s[6:7] == "/" and s[-6:-5] == " " else "timestamped"
        else:
            shape = "level_first" if pri is None else "rfc3164"
    else:
        matched, shape, has = False, "", 0
        pieces = ((0, None),)
        host = prog = pid = _NONE
    status = -1
    if level is None and ts is not _NONE and (shape == "access" or " /" in key or '"/' in key):
        status = _status(key, at, shape)
        if status >= 0:
            has |= _HAS_STATUS
    # a line whose header holds a time starts a record, indented or not (`    2023-01-12T10:01:22Z [INFO] ...`)
    return (ts, host, prog, pid, tok, level, pri or _NONE, pieces, matched, shape,
            ts is _NONE and _continues(key) is not None, status, body, has, key[ts[0]:ts[1]].translate(_ZERO_TEXT))


def _status(key: str, at: int, shape: str) -> int:
    """Where an access log's status code starts (header.STATUS), or -1."""
    if shape == "access":
        at = key.find('"', at)
        m = STATUS["access"].match(key, at) if at >= 0 else None
    else:
        r = REQUEST.search(key, at)
        m = STATUS[""].match(key, r.start()) if r is not None else None
    return m.start(1) if m is not None else -1


@functools.cache
def _reader() -> _core.HeaderRecipes:
    """recipe() in the core (ext/core/header_recipe.hpp: once per process, on first use)."""
    return _core.HeaderRecipes(header_jit.PATTERNS, _FIRSTS, _STARTS, _level)


def recipes(keys: list[str]) -> list[tuple]:
    """recipe() of each key, in one call into the core for the ASCII keys; recipe() over Python's re reads those
    it leaves (not ASCII, or a match that stopped at a PCRE2 limit)."""
    got = _reader().read(keys)
    if None in got:
        for i, r in enumerate(got):
            if r is None:
                got[i] = recipe(keys[i])
    return got


def _recipes_of(keys: list[str]) -> list[tuple]:
    """The parse of each line's whole key (shape_key): the one kept, else its parse, kept; the keys not kept are
    read in one call into the core (recipes)."""
    got = list(map(_RECIPES.get, keys))
    new = list(dict.fromkeys(k for k, r in zip(keys, got) if r is None))
    if new:
        parsed = dict(zip(new, recipes(new)))
        got = [r or parsed[k] for k, r in zip(keys, got)]
        for key, r in parsed.items():
            if len(key) <= MAX_KEY:
                if len(_RECIPES) >= RECIPES_MAX:
                    _RECIPES.clear()
                _RECIPES[key] = r
    return got


class Columns:
    """Per line of a document: the header's fields ("" or None where absent; see columns())."""

    __slots__ = ("bodies", "continued", "hosts", "levels", "lines", "matched", "messages", "pris", "recipes",
                 "shapes", "stamp_masks", "stamps")

    def __init__(self, lines: list[str], recipes: list[tuple]) -> None:
        self.lines, self.recipes = lines, recipes
        has = 0
        for bits in set(map(itemgetter(13), recipes)):     # what any line has (most documents: a few kinds)
            has |= bits
        self.stamps = [ln[r[0][0]:r[0][1]] for ln, r in zip(lines, recipes)]
        self.stamp_masks = set(map(itemgetter(14), recipes))    # the stamps' texts with their digits written 0
        self.hosts = [ln[r[1][0]:r[1][1]] for ln, r in zip(lines, recipes)] if has & _HAS_HOST else []
        self.levels = list(map(itemgetter(5), recipes))
        if has & _HAS_STATUS:                        # an access log's status: 5xx ERROR, 4xx WARN, else INFO
            self.levels = [_BY_STATUS.get(ln[r[11]]) if r[11] >= 0 else lv for ln, r, lv in zip(lines, recipes, self.levels)]
        self.pris = [ln[r[6][0]:r[6][1]] for ln, r in zip(lines, recipes)] if has & _HAS_PRI else []
        if not has & _HAS_PIECES:
            self.messages = [ln[r[7][0][0]:] for ln, r in zip(lines, recipes)]
        else:
            self.messages = [ln[r[7][0][0]:r[7][0][1]] if len(r[7]) == 1 else "".join(ln[a:b] for a, b in r[7])
                             for ln, r in zip(lines, recipes)]
        if not has & _HAS_BODY:
            self.bodies = self.messages
        else:
            self.bodies = [msg if r[12] is None else "".join(ln[a:b] for a, b in r[12])
                           for ln, r, msg in zip(lines, recipes, self.messages)]
        self.matched = list(map(itemgetter(8), recipes))
        self.shapes = Counter(map(itemgetter(9), recipes))
        self.continued = list(map(itemgetter(10), recipes))

    def field(self, at: int) -> list[str]:
        """Per line the text of recipe field `at` (0 ts, 1 host, 2 program, 3 pid, 4 level token)."""
        return [ln[r[at][0]:r[at][1]] for ln, r in zip(self.lines, self.recipes)]


def _digits(text: str) -> str:
    """`text` with every ASCII digit written 0 (the cheap first key: most lines' parse is kept under it)."""
    return text.encode("utf-8", "surrogatepass").translate(_ZERO).decode("utf-8", "surrogatepass")


def shape_key(text: str) -> str:
    """`text` with every ASCII digit written 0 and every hex id in one form per length and leading digits: the
    key a line's parse is kept under (the module docstring; the C++ core, ext/core/shape_key.cpp). A text the
    core cannot encode (a lone surrogate) has its digits written 0 only."""
    try:
        return _core.shape_key(text)
    except UnicodeEncodeError:
        return _digits(text)


def columns(text: str, lines: list[str]) -> Columns:
    """The header fields of every line of a document (`lines`: text.split("\\n"))."""
    keys = _digits(text).split("\n")     # a line without hex ids: its key; else its key is read on a miss
    recipes = list(map(_RECIPES.get, keys))
    missed = [i for i, r in enumerate(recipes) if r is None]
    if missed:
        for i, r in zip(missed, _recipes_of(_shape_keys([keys[i] for i in missed]))):
            recipes[i] = r
    return Columns(lines, recipes)


def _shape_keys(texts: list[str]) -> list[str]:
    """shape_key of each text, in one call into the core (a newline is no word byte: the fold of each line is
    its own); one text at a time where one holds what the core cannot encode (a lone surrogate)."""
    try:
        return _core.shape_key("\n".join(texts)).split("\n")
    except UnicodeEncodeError:
        return list(map(shape_key, texts))
