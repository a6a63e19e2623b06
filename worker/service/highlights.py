"""Highlights: the input lines that matter most, chosen without a model.

A line scores by three signals:
- severity words (error, fail, timeout, ...): the highest one in the line;
- rarity of its shape: a line unlike the others is news, the thousandth
  heartbeat is not. The shape is the line lowercased with digits, "." and the
  hex letters a-f deleted, so numbers and hex ids vanish and words keep enough
  letters to tell lines apart;
- numeric outliers: among lines of one shape and one count of numbers (at least
  MIN_GROUP lines), each number position is compared with its peers by a robust
  z-score (median and MAD of that position). A PM row whose counter is far from
  the other rows scores like a severity word.
Selection takes the best line of each shape first; another line of a chosen
shape is taken only if it is itself an outlier. If fewer than k lines remain
after that, the best skipped lines fill the rest, so the result always has
min(k, non-empty lines) lines.

A number is a run of digits with at most one "." between digits, not glued to
a preceding letter ("t300", "ipv4" are names), at most 18 digits, and not the
start of a hex id ("0x7f3a", or 8+ chars of 0-9a-f with a letter). A unit may
follow ("35ms" is 35).

Cost: the document is scanned as one lowercased byte string by bytes.translate
and a fixed number of numpy passes; Python works per line only (strip, a dict
of shapes), never per character or per number; sorting is over the lines and,
for the two medians, over the numbers of the groups compared (n log n there,
linear elsewhere). No pairwise comparison. Runs on the GPU thread
for every document (2,000 log lines, 126 kB: about 6 ms on the 2-core dev VM).
Deterministic: equal input gives equal highlights; equal scores go to the
farther outlier, then to the earlier line.
"""

from __future__ import annotations

import numpy as np

MIN_GROUP = 5         # lines of one shape needed before their numbers are compared
Z_OUTLIER = 3.5       # robust z from which a number is an outlier (Iglewicz & Hoaglin)
RARITY_WEIGHT = 2.0   # a line of a unique shape scores this much
MAX_DIGITS = 18       # longer digit runs are ids, not magnitudes (and float64 stays exact enough)

_SEVERITY = {
    "panic": 6.0, "fatal": 6.0, "crit": 5.0, "critical": 5.0, "emerg": 5.0, "alert": 4.0,
    "segfault": 6.0, "crash": 5.0, "core": 2.0, "dump": 2.0, "oom": 5.0, "killed": 4.0,
    "error": 4.0, "err": 3.0, "fail": 4.0, "failed": 4.0, "failure": 4.0, "exception": 4.0,
    "timeout": 3.5, "timed": 2.0, "refused": 3.0, "reset": 2.0, "unreachable": 3.5, "down": 3.0,
    "drop": 2.5, "dropped": 2.5, "lost": 3.0, "reject": 3.0, "rejected": 3.0, "denied": 3.0,
    "warn": 1.5, "warning": 1.5, "retry": 1.0, "retrying": 1.0, "degraded": 2.5, "overload": 3.0,
    "abort": 3.0, "aborted": 3.0, "restart": 2.0, "restarted": 2.0, "alarm": 3.0,
}
_MIN_WORD = min(len(w) for w in _SEVERITY)
_MAX_WORD = max(len(w) for w in _SEVERITY)  # <= 12 letters: a word code (5 bits a letter) fits int64
_SHAPE_DELETE = b"0123456789abcdef."     # deleted from a line to get its shape
_MAX_RUN = 2 * MAX_DIGITS + 1            # longest run of digits and points that can be a number


def _word_code(word: str) -> int:
    """A word of a-z as an integer, 5 bits a letter; equal codes mean equal words."""
    code = 0
    for ch in word.encode():
        code = (code << 5) | (ch - 96)
    return code


def _severity_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes [S] sorted, their scores [S], could-be [length, first, last letter] bool) of the severity words."""
    words = sorted(_SEVERITY, key=_word_code)
    could_be = np.zeros((_MAX_WORD + 1, 26, 26), dtype=bool)
    for w in words:
        could_be[len(w), ord(w[0]) - 97, ord(w[-1]) - 97] = True
    return (np.array([_word_code(w) for w in words], dtype=np.int64),
            np.array([_SEVERITY[w] for w in words]), could_be)


def _place_values() -> np.ndarray:
    """[2 * _MAX_RUN + 1]: value of a digit at distance d (index d + _MAX_RUN) from its number's point.

    The point is where "." is, or the end of an integer: 10**(-d-1) before it, 0 at it, 10**-d after.
    """
    d = np.arange(-_MAX_RUN, _MAX_RUN + 1, dtype=np.float64)
    return np.where(d < 0, 10.0 ** (-d - 1), np.where(d > 0, 10.0 ** -d, 0.0))


_SEVERITY_CODES, _SEVERITY_SCORES, _SEVERITY_SHAPES = _severity_table()
_PLACE = _place_values()


def _document(cands: list[str]) -> bytes:
    """The lines as one lowercased byte string, one line per b"\\n" (inner newlines become spaces)."""
    if any("\n" in c for c in cands):
        cands = [c.replace("\n", " ") for c in cands]
    return "\n".join(cands).encode("utf-8", "surrogatepass").lower()


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts [R], exclusive ends [R]) of the runs of True in mask [n]."""
    edges = np.flatnonzero(mask[1:] != mask[:-1]) + 1             # [E] offsets where mask flips
    if len(mask) and mask[0]:
        edges = np.concatenate(([0], edges))
    if len(mask) and mask[-1]:
        edges = np.concatenate((edges, [len(mask)]))
    return edges[0::2], edges[1::2]


def _members(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets [M] int32 of every char of the runs, first [R] index in it of each run): for reduceat.

    int32 offsets: a document (one Kafka message) is far below 2 GiB.
    """
    length = (end - start).astype(np.int32)                        # [R]
    first = np.cumsum(length) - length                            # [R] first member of each run
    offset = np.arange(int(length.sum()), dtype=np.int32) - np.repeat(first, length)  # [M] 0.. in the run
    return np.repeat(start.astype(np.int32), length) + offset, first


def _severity(a: np.ndarray, letter: np.ndarray, newlines: np.ndarray, n_lines: int) -> np.ndarray:
    """[n_lines] float64: the highest severity word of each line (a word is a whole run of a-z)."""
    start, end = _runs(letter)                                     # [W], [W]
    length = end - start
    maybe = (length >= _MIN_WORD) & (length <= _MAX_WORD)
    maybe[maybe] = _SEVERITY_SHAPES[length[maybe], a[start[maybe]] - 97, a[end[maybe] - 1] - 97]
    start, end = start[maybe], end[maybe]                          # [V] words of a severity word's shape
    sev = np.zeros(n_lines)
    if len(start) == 0:
        return sev
    idx, first = _members(start, end)                              # [M], [V]
    shift = 5 * (np.repeat(end, end - start) - 1 - idx)            # [M] bits above this letter
    code = np.add.reduceat((a[idx].astype(np.int64) - 96) << shift, first)  # [V] int64
    slot = np.minimum(np.searchsorted(_SEVERITY_CODES, code), len(_SEVERITY_CODES) - 1)  # [V]
    hit = _SEVERITY_CODES[slot] == code                            # [V] bool
    if hit.any():
        np.maximum.at(sev, np.searchsorted(newlines, start[hit]), _SEVERITY_SCORES[slot[hit]])
    return sev


def _numbers(a: np.ndarray, letter: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values [T] float64, byte offsets [T] int64) of the numbers in a ([n] uint8 lowered bytes)."""
    dig = (a >= 48) & (a <= 57)                                    # [n] bool
    point = (a[:-1] == 46) & dig[1:]                               # [n-1] "." before a digit
    numch = dig.copy()                                             # [n] digits and such points
    numch[:-1] |= point
    start, end = _runs(numch)                                      # [R], [R]
    glued = letter[np.maximum(start - 1, 0)] & (start > 0)         # [R] "t300", "ipv4": names
    ok = dig[start] & ~glued & (end - start <= _MAX_RUN)
    start, end = start[ok], end[ok]
    if len(start) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    dots = np.flatnonzero(point)                                   # [D] offsets of decimal points
    dot_run = np.searchsorted(start, dots, side="right") - 1       # [D] run of each (or a dropped one)
    inside = (dot_run >= 0) & (dots < end[np.maximum(dot_run, 0)])
    dots, dot_run = dots[inside], dot_run[inside]
    dotpos = end.copy()                                            # [R] the point, or the end if none
    dotpos[dot_run] = dots
    idx, first = _members(start, end)                              # [M] int32, [R]
    length = end - start                                           # [R]
    rel = idx - np.repeat((dotpos - _MAX_RUN).astype(np.int32), length)  # [M] distance to point + _MAX_RUN
    vals = np.add.reduceat((a[idx] - np.float64(48)) * _PLACE[rel], first)  # [R] the point weighs 0
    ndots = np.bincount(dot_run, minlength=len(start))             # [R]
    ok = (ndots <= 1) & (length - ndots <= MAX_DIGITS) & ~_hex_id(a, letter, dig, start, end, dotpos)
    return vals[ok], start[ok]


def _hex_id(a: np.ndarray, letter: np.ndarray, dig: np.ndarray,
            start: np.ndarray, end: np.ndarray, dotpos: np.ndarray) -> np.ndarray:
    """[R] bool: the [0-9a-z] run beginning at each number is a hex id: "0x...", or 8+ chars of 0-9a-f.

    The digits [start, dotpos) of a number are followed by a letter only when the
    number has no point (dotpos == end); the run is a hex id only if that letter
    is a-f, so the search for the run's end is for those few numbers only.
    """
    n = len(a)
    nxt = a[np.minimum(end, n - 1)]                                # [R] byte after the number
    followed = (dotpos == end) & (end < n)                         # [R] integer, not at the very end
    zero_x = followed & (end - start == 1) & (a[start] == 48) & (nxt == 120)
    cand = np.flatnonzero(followed & (nxt >= 97) & (nxt <= 102))   # [H] "7f3a1e10", "3db", "12ab..."
    hex_long = np.zeros(len(start), dtype=bool)
    if len(cand):
        sep = np.append(np.flatnonzero(~(letter | dig)), n)        # [S+1] non-alnum offsets, then n
        run_end = sep[np.searchsorted(sep, end[cand])]             # [H] exclusive end of the run
        ghz = np.append(np.flatnonzero(letter & (a > 102)), n)     # [G+1] offsets of g-z, then n
        next_ghz = ghz[np.searchsorted(ghz, end[cand])]            # [H] first g-z at or after end
        hex_long[cand] = (run_end - start[cand] >= 8) & (next_ghz >= run_end)
    return zero_x | hex_long


def _cell_sorted(x: np.ndarray, cell: np.ndarray, n_cells: int) -> np.ndarray:
    """[T] x sorted by (cell, value): a value sort, then a stable (radix for int16) sort by cell."""
    by_value = np.argsort(x)                                       # [T]
    cells = cell[by_value].astype(np.int16 if n_cells < 2**15 else np.int64)
    return x[by_value[np.argsort(cells, kind="stable")]]


def _robust_z(cell: np.ndarray, vals: np.ndarray, n_cells: int) -> np.ndarray:
    """[T] float64: |x - median| / scale of each value within its cell (one number position of one group).

    scale is 1.4826 * MAD; when more than half a cell is equal (MAD = 0) it falls
    back to 1.2533 * mean absolute deviation, so one deviant row among n >= 5
    equal rows still stands out (z = n / 1.2533 for a single deviant).
    """
    cnt = np.bincount(cell, minlength=n_cells)                     # [C] > 0 (cells are dense)
    base = np.concatenate(([0], np.cumsum(cnt)[:-1]))             # [C] first sorted slot of each cell
    lo, hi = base + (cnt - 1) // 2, base + cnt // 2                # [C] middle slots

    def median(x: np.ndarray) -> np.ndarray:                       # [T] -> [C]
        s = _cell_sorted(x, cell, n_cells)
        return 0.5 * (s[lo] + s[hi])

    dev = np.abs(vals - median(vals)[cell])                        # [T]
    mad = median(dev)                                              # [C]
    mean_ad = np.bincount(cell, weights=dev, minlength=n_cells) / cnt  # [C]
    scale = np.where(mad > 0, 1.4826 * mad, 1.2533 * mean_ad)[cell]  # [T]
    return np.divide(dev, scale, out=np.zeros_like(dev), where=scale > 0)


def _outlier_z(shape: np.ndarray, vals: np.ndarray, line: np.ndarray) -> np.ndarray:
    """[L] float64: each line's largest robust z over its numbers, among lines of its shape and count.

    shape [L] int64 shape id of each line; vals [T] numbers; line [T] their line (non-decreasing).
    """
    n_lines = len(shape)
    best = np.zeros(n_lines)
    if len(vals) == 0:
        return best
    count = np.bincount(line, minlength=n_lines)                   # [L] numbers per line
    key = shape * (int(count.max()) + 1) + count                   # [L] group key: (shape, count)
    _, group, size = np.unique(key, return_inverse=True, return_counts=True)  # [L], [G]
    group = group.reshape(-1)
    cells = np.zeros(len(size), dtype=np.int64)                    # [G] cells (positions) of each group
    cells[group] = count
    cells[size < MIN_GROUP] = 0
    base = np.cumsum(cells) - cells                                # [G] first cell of each group
    tok_group = group[line]                                        # [T]
    keep = cells[tok_group] > 0                                    # [T] in a group large enough
    if not keep.any():
        return best
    head = np.zeros(len(line), dtype=np.int64)                     # [T] index of the line's first number
    new_line = np.flatnonzero(line[1:] != line[:-1]) + 1
    head[new_line] = new_line
    pos = np.arange(len(line)) - np.maximum.accumulate(head)       # [T] position within the line
    cell = base[tok_group[keep]] + pos[keep]                       # [K] dense cell ids
    np.maximum.at(best, line[keep], _robust_z(cell, vals[keep], int(cells.sum())))
    return best


def _outlier_score(z: np.ndarray) -> np.ndarray:
    """0 below Z_OUTLIER; from there like an "error" (4.0), growing to a "fatal" (6.0) at 4x."""
    grown = 4.0 + np.log2(np.maximum(z, Z_OUTLIER) / Z_OUTLIER)
    return np.where(z >= Z_OUTLIER, np.minimum(grown, 6.0), 0.0)


def _select(order: list[int], shapes: list[int], outlier: list[bool], k: int) -> list[int]:
    """Best first, one line per shape unless the line is an outlier; then fill up to k."""
    chosen: list[int] = []
    skipped: list[int] = []
    used: set[int] = set()
    for j in order:
        if shapes[j] in used and not outlier[j]:
            skipped.append(j)
            continue
        used.add(shapes[j])
        chosen.append(j)
        if len(chosen) == k:
            return chosen
    return chosen + skipped[: k - len(chosen)]


def highlights(lines: list[str], k: int) -> list[str]:
    """The k most telling non-empty lines, stripped, in their original order."""
    if k <= 0:
        return []
    cands = [s for s in (ln.strip() for ln in lines) if s]
    if len(cands) <= k:
        return cands
    doc = _document(cands)
    a = np.frombuffer(doc, dtype=np.uint8)                         # [n] lowered bytes
    newlines = np.flatnonzero(a == 10)                             # [L-1] line ends
    ids: dict[bytes, int] = {}
    shape = np.array([ids.setdefault(sh, len(ids)) for sh in doc.translate(None, _SHAPE_DELETE).split(b"\n")],
                     dtype=np.int64)                               # [L] shape id of each line
    letter = (a >= 97) & (a <= 122)                                # [n] bool
    vals, offsets = _numbers(a, letter)                            # [T], [T]
    z = _outlier_z(shape, vals, np.searchsorted(newlines, offsets))  # [L]
    rarity = RARITY_WEIGHT / np.bincount(shape)[shape]             # [L]
    score = _severity(a, letter, newlines, len(cands)) + _outlier_score(z) + rarity  # [L]
    # best first; on equal scores the farther outlier, then the earlier line (lexsort is stable)
    order = np.lexsort((-z, -score)).tolist()
    chosen = _select(order, shape.tolist(), (z >= Z_OUTLIER).tolist(), k)
    return [cands[j] for j in sorted(chosen)]
