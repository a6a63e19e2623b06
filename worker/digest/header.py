"""The header grammar: one regular expression that reads the header of any log line on its own.

    HEADER: re.Pattern, one match per line (re.M), its fields in named groups
    LEVEL_GROUPS: the groups a level token may stand in; level_token(token) -> its level word
    (worker/digest/header_rows.py applies HEADER to a document's lines and reads the groups)

A line is read by itself (never by the lines around it or a format chosen for its document), so the
same line reads the same in every document and window. The grammar is a sequence of optional parts,
each tried in order and kept when it matches:

1. an octet count and a syslog PRI `<13>`; with a version digit after it (`<13>1 `) the line is RFC
   5424 and its fixed fields follow (time, host, app, procid, msgid, structured data); else RFC 3164;
2. a level before the time: `WARN  [thread] ts`, `[INFO] ...`, `[DEBUG ts thread]`, `E [ts]`,
   `I, [ts #pid]  INFO -- :` (Ruby), klog/glog's `E0211 13:17:55.023299 tid file.go:60]` (and
   `I210503`, `I20250211`), `=INFO REPORT==== ts ===`, `ERRO[0012]` (logrus), `ERROR:logger:`, `fail: `
   (.NET's console), a letter opening a bracket with the time (`[W 240201 08:00:00 web:12]`), `kern  :err   : `;
3. a timestamp of any common shape (worker/digest/timeparse.py's SHAPES), bare or in `[...]`, `(...)`, `<...>` (a level may
   follow it inside: `[ts ERROR main]`, `[ts INF]`, `[ts: ERROR/Worker-2]`), the kernel's `[   12.345678]` (in brackets
   only), a pid glued before it (`2345:20230112:100122.123`), after at most four leading columns when the first holds a
   digit, is `-` or is an upper-case word (record ids, access logs' client fields, a label column);
   an epoch or a date-only field may be followed by a node and a second time
   (`1117838570 2005.06.03 R02-M1 2005-06-03-15.42.50.675872`);
4. after a time syslog writes (RFC 3164, RFC 3339, `dd-Mon hh:mm`): `host [facility.severity]
   prog[pid]:`, `prog[pid]:`, `host:`, or a host before an untagged message (after RFC 3164's time or the year-first
   `2023 Jan 12 10:01:22`), then the program's own
   `time [category:] level: ` (taken off) or bare `level: ` or upper-case `LEVEL ` (read, kept in the message);
   after any other time `[host] prog[pid(:tid)]` (`: ` or a `level: ` after it); otherwise a `%` column, a pid (and a
   thread id; a column of more digits than a pid holds is an id too, never a host), a name before `(level):`, a
   host when a level token follows it (no token ending in `:`, no address with a port), the line prefix before a
   `LEVEL:` (in words, or glued to it by `>`, `]`, `:`; a lower-case `level:` after one such token), keyed fields
   holding `Host(...)`, bracketed tags and ` - `, the level token (`INFO`, `[warn ]`, `[W]`, `<error>`, `[mod:error]`,
   `local.INFO:`, `WARNING:mod:`, `warn/Component:`, `name[LEVEL]:`, `Warning`, `LOG:`, a letter where a letter is
   the level: `I NETWORK [conn]`, logcat's `pid tid D Tag:` and `D/Tag( pid):`),
   `(pid on host):`, one-token tags (a second bracketed level word among them, `[warning][config]`, a `(thread)` beside
   a bracket, `[k:v k:v]`; a bracket of several words is message text unless a logger follows it) closed by `: `, a
   logger (`org.x.Y: `, `a.B#run: `, `MyApp - `, `a::b - `, `a.b.C.method `, `file.go:12 `, `file.go:12: `, `CBS  `,
   a function after a trace arrow `=> name: `; a subsystem's bare `Name: ` is the message's), then the
   `fields` before the message: an OS error (`(13)Permission denied: `) where a field follows it, bracketed
   `[key value]` fields (`[client 192.0.2.1:5000]`) and an error id (`AH00558: `, `ORA-01555: `, `AMQ9209E: `); or
   `ts|field|field|` (`ts|LEVEL|logger|`: its level); or `program - `; or a source place after a time (`main.go:42: `);
5. a CEF record's severity field, where it is a level word (a look-ahead: the record stays the message).

TRAILER is the one field after a message: a log4j logger written as `%m (%c)` (`... (org.acme.x.Y)`).
The fields and the trailer are no part of the message, but stay in what the templater reads (an
operator searches by `[client ...]` and `AH00558`; header_rows.py keeps both texts).
STATUS finds an access log's status after its request (where a timed line has no level token: its level).

The grammar holds no literal digit (every digit is read as `\\d` or in a class of all ten): a line
parses exactly as the same line with its digits written 0 (what header_rows.py keys its memo by).
Levels, time shapes and tags are word classes, not a list of systems.

Where a run can only be followed by a character it does not hold (a token before whitespace, a host before a
space or `:`, a program before `[`, ` ` or `:`), the run is possessive (`\\S++\\s`, `{0,80}+`): the same matches,
without trying every shorter run on a miss; optional groups compile as alternations (_optional_as_branch); and
the alternatives that search a logger or a context by backtracking open with a look-ahead that only skips work
(_SKIP_*: a condition every match of the alternative meets, tested by possessive runs).

Why a grammar of our own: the maintained parsers read one known format each (syslog-rfc5424
parsers, grok pattern sets, pyparsing grammars of one format) and need it named; none finds the
header of a line whose format nobody named, and a Python parser per line would cost several times
this one regular expression per distinct line.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from worker.digest.timeparse import BARE_HOST_SHAPES, DATE_ONLY, SYSLOG_SHAPES, shapes
from worker.messages.levels import SPELLINGS

EXTRA_LEVELS = {"LOG": "INFO", "STATEMENT": "INFO", "DETAIL": "INFO", "HINT": "INFO", "CONTEXT": "INFO",
                "LOCATION": "INFO", "QUERY": "INFO", "BLAT": "TRACE",
                "MAJOR": "ERROR", "MINOR": "WARN", "CLEARED": "INFO", "INDETERMINATE": "NOTICE",   # X.733 alarm severities
                **{f"DEBUG{i}": "DEBUG" for i in range(10)}}    # PostgreSQL's, upper case only (every digit:
                                                                 # no literal digit in the grammar)
_EXTRA = sorted(EXTRA_LEVELS, key=len, reverse=True)


def _trie(words: list[str]) -> str:
    """An alternation of words as a trie (`e(?:rr(?:or)?|...)`): one branch tried per letter, not per word."""
    tree: dict = {}
    for w in words:
        node = tree
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    def walk(node: dict) -> str:
        alts = [re.escape(ch) + walk(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body
    return walk(tree)


_LEVEL_ANY = rf"(?=[A-Za-z])(?:(?i:{_trie(sorted(SPELLINGS))})|{_trie(_EXTRA)})"   # a level word, its end unread
LEVEL_WORD = rf"{_LEVEL_ANY}(?![\w.\-/])"
# a level word before `/` and a component (`WARNING/Worker-3]`, `critical/IdoPgsql:`)
_LEVEL_SLASH = rf"{_LEVEL_ANY}(?=/[\w.-])"
# a level word standing bare (not in brackets): in upper case any spelling, else only the words that are
# no ordinary English opening a sentence (`Note that`, `Config loaded`, `Critical section` are prose)
_PLAIN = ("info", "information", "informational", "warn", "warning", "error", "err", "debug", "fatal", "dpanic",
          "erro", "eror", "wrn", "debu", "fata", "dbg", "inf", "trc", "ftl")
_COLON_ONLY = ("fail", "crit", "dbug", "trce")    # a level only where it opens a line before a colon (`fail: `)
BARE_LEVEL = rf"(?:(?=[A-Z][A-Z0-9]*(?![\w]))(?:{LEVEL_WORD})|(?=[A-Za-z])(?i:{_trie(sorted(_PLAIN))})(?![\w.\-/]))"
_COLON_LEVEL = rf"(?:{BARE_LEVEL}|(?=[A-Za-z])(?i:{_trie(sorted(_COLON_ONLY))})(?![\w.\-/]))"
_LEVEL_TOKEN = (rf"(?:\[\s*(?:[\w.]*:)?{LEVEL_WORD}\s*\]|\[[DIWEF]\]|<{LEVEL_WORD}>|\({LEVEL_WORD}\)"
                rf"|(?:[a-z][\w-]*\.)?{BARE_LEVEL}(?=:?(?:\s|$)|\[|:[\w.]+:))")   # `[W]`, `local.INFO:`, `user.warn`, `WARNING:tm:`
_NOT_LEVEL = rf"(?!\[\s*(?:[\w.]*:)?{LEVEL_WORD}\s*\]|\[[DIWEF]\])"
_BRACES = r"\([\w.-]+\|\d+\)|\{{1,2}[^{}\s]{0,100}\}{1,2}"
_TAG_ONE = rf"(?:\[[^\[\]\s]{{0,100}}(?:\[[^\[\]\s]{{0,40}}\][^\[\]\s]{{0,100}})*\]|\[[a-z]+ \d+(?::[a-z]+ \d+)?\]|\[\s*\d+\]|{_BRACES})"
_TAG = rf"{_NOT_LEVEL}{_TAG_ONE}"       # after a level (the tags right after it: any, `[warning][config]`'s second one too)
_MDC = r"\[[\w.-]+:[^\s\[\]]*(?: [\w.-]+:[^\s\[\]]*)+\]"     # `[c:coll s:shard1 r:core_node2]`
# a thread in parentheses beside a bracketed category (`[org.x.Y] (worker-1) `, `(qtp-17) [c:x] `): a word in it
_THREAD = r"(?:(?<=\]\ )\((?=[^()]*[A-Za-z])[^()\[\]]{1,60}\)(?=\s)|\((?=[^()]*[A-Za-z])[^()\[\]]{1,60}\)(?=\s+\[))"
_TAG_ANY = rf"{_NOT_LEVEL}(?:\[[^\[\]]{{1,300}}\]|{_BRACES})"          # before one: `[Thread 1]`, `[   46]`
_PRETAG = rf"(?!\[\d{{1,4}}[-/.: ]|\[\d{{9}}|\[\d+\.\d+\])(?:{_TAG}|\|[^|\[\]]{{1,60}}\|)"   # before the time: no time itself
_ERROR_ID = r"[A-Z]{2,8}-?\d{3,6}[A-Z]?:"     # an error id before the message: `AH00558:`, `ORA-01555:`, `AMQ9209E:`, `WFLYCTL0013:`
_KV = r"\[[a-z]+ [^\[\]\s]{1,100}\]"        # a bracketed `[key value]` field: `[client 192.0.2.1:5000]`
# an OS error before the fields (httpd 2.4's `%E: `, `(13)Permission denied: `): a field where a bracketed field or an
# error id follows it, else message text
_ERRNO = rf"\(\d{{1,6}}\)[^:\[\]]{{1,120}}:\s+(?={_KV}|{_ERROR_ID})"
_HOST = r"[A-Za-z0-9#][\w.:/()@#-]{0,80}+"
_HOST_NC = r"[A-Za-z0-9#][\w./()@#-]{0,80}+"      # a host before a colon
_PROG = r"[A-Za-z_/][\w./@()<>-]{0,80}+"
# Look-aheads that only skip work (_SKIP_*): each holds wherever the part after it matches, so the grammar matches
# the same without them (tests/digest/test_header_branch.py); possessive runs test it before the part's search
# backtracks through every shorter run. A logger before `:` is one run of its characters (`::` in pairs), then `:`;
# a logger before ` - ` one run, then ` - `; a context before `NAME: ` has a colon after three capitals ahead.
_SKIP_COLON_LOGGER = r"(?=[\w$.@#-]*+(?:::[\w$.@#-]*+)*+(?:\[\d+\])?\s*:\s)"
_SKIP_DASH_LOGGER = r"(?=[\w.$:]++\s+-\s)"
_SKIP_CTX = r"(?=(?:[^:\n]*+:)+?(?<=[A-Z]{3}:)\s)"
_LOGGER = (rf"(?:{_SKIP_COLON_LOGGER}[A-Za-z_$][\w$-]*(?:(?:[.$@#]|::)[\w$-]+)+(?:\[\d+\])?\s*:\s+"  # org.x.Y:  a::b:  a.B#run:
           rf"|{_SKIP_DASH_LOGGER}[\w.$]+(?:::[\w$]+)*(?:\.java:\d+)?\s+-\s+"      # MyApp -  File.java:240 -  a::b -
           r"|[a-z_]\w*(?:\.\w+){2,}\s+"                               # org.apache.x.Y.method
           r"|[\w./-]+\.\w+:\d+[\]:]?\s+"                              # pkg/file.go:12  file.go:12:
           r"|[A-Z][A-Za-z]{1,15}\s{2,}"                               # CBS  (Windows)
           r"|(?:=>|<=)\ ?[A-Za-z_]\w*:\s+)")                          # => do_search:  (a function traced on entry, exit)




def _read(groups: list[str]) -> str:
    """A condition: one of the (empty) groups matched."""
    return "".join(f"(?({g})|" for g in groups) + "(?!)" + ")" * len(groups)


_SY = _read([f"{m}{i}" for m in ("sy", "sz") for i in SYSLOG_SHAPES])     # a syslog-shaped time was read
_SY_BARE = _read([f"{m}{i}" for m in ("sy", "sz") for i in BARE_HOST_SHAPES])   # one a bare host may follow
_HMSF = r"\d{2}:\d{2}:\d{2}\.\d{1,6}"

_GRAMMAR = rf"""^
(?P<indent>[ \t]*)
(?:(?P<oct>\d{{1,5}})\ (?=<\d))?
(?:<(?P<pri>\d{{1,3}})>)?
(?:
  # RFC 5424 (the version digit decides, line by line)
  (?P<v5>\d{{1,2}})\ (?P<ts5>\d{{4}}-\d{{2}}-\d{{2}}T\S+|-)\ (?P<host5>\S+)\ (?P<prog5>\S+)\ (?P<pid5>\S+)\ \S+
  (?:\ (?:-|(?:\[(?:[^\]\\]|\\.)*\])+))?(?:\ |$)
|
  # a level before the time
  (?:
    (?P<lvk>[IWEFD])(?P<tsk>\d{{4}}\ {_HMSF}|\d{{6}}\ {_HMSF}|\d{{8}}\ {_HMSF})
      \s+(?:\d+\s+)?(?:[\w./-]+:\d+\]?\s+)?(?:⋮\s+)?
  | [DIWEFA],\ \[(?P<tsr>[^\]\s#]+)\ \#(?P<pidr>\d+)\]\s+(?P<lvr>{LEVEL_WORD})\ --\ [^:]*:\ ?
  | =(?P<lve>{LEVEL_WORD})\ REPORT=+\ (?P<tse>[^=]+?)\ =+\s*
  | (?P<lvb>{LEVEL_WORD})\[\d+\]\s*
  | (?:==>\ )?(?P<lvc>{_COLON_LEVEL}):(?:[\w.]+:)?\s*
  | \[\s*(?P<lvq>{LEVEL_WORD}|[DIWEF])\s+(?=\d)
  | [a-z]{{2,8}}\ *:(?P<lvx>{LEVEL_WORD})\ *:\s+(?=\[)
  | (?P<lvf>{_LEVEL_TOKEN}|[DIWEF](?=\ \[\d))\s*(?=[\[\d|])
  )?
  (?P<pretags>(?:{_PRETAG}\s*){{0,12}})
  (?:
    (?P<pre>(?:-|[A-Z][A-Z_]*(?=\s)|(?=[^\s"=\d]*+\d)[^\s"=]{{1,100}}+)\s+(?:[^\s"=]{{1,100}}+\s+){{0,3}}?)??
    (?:(?P<pidz>\d{{1,7}}):(?=\d{{8}}:)|\#{{2,8}}(?=<))?(?P<ob>[\[(<])?(?(ob)\ *)(?P<ts>{shapes("sy")}|\d{{1,10}}\.\d{{6}}(?=\]))
    (?:\s+(?P<ts1b>{DATE_ONLY}))?
    (?:\s+(?P<node>\S{{1,80}}+)\s+(?P<ts2>{shapes("sz")}))?
    (?(ob)(?:[\])>]|:?\ (?:(?P<lvo>{LEVEL_WORD}|{_LEVEL_SLASH})(?:(?:\ |/)[^\][\s]{{1,40}})?|[^\][\s]{{1,40}})\]|(?=\s))|(?(lvq)\ ?[^\][\s]{{0,40}}\]|(?=[\s:,|]|$)))
  )?
)
(?:(?<=\ )(?=\S)|[\t ]*(?:[,|:]\s*|\s+|$))?(?:-\s+(?=\S))?
(?(ts)(?:(?:stdout|stderr)\ [FP]\ )?)
(?(lvf)(?P<lgf>{_LOGGER})?)
(?(v5)|
(?:
  # syslog: host prog[pid]:  prog[pid]:  host:  (after a time syslog writes)
  {_SY}
  (?:
    (?!{LEVEL_WORD}\s)(?P<host>{_HOST})(?<!:)\s+(?:(?P<lvs>[a-z]+\.{LEVEL_WORD})\s+)?
    (?!{LEVEL_WORD}[:\[\s])(?P<prog>{_PROG})
    (?:\[(?P<pid>\d+)\](?:\ \([^)\s]{{1,40}}\))?|\ (?P<pidn>\d+))?:(?:\s|$)
  | (?!{LEVEL_WORD}[:\[\s])(?P<progp>{_PROG})\[(?P<pidp>\d+)\]:(?:\s|$)
  | (?!{LEVEL_WORD}:)(?P<hostc>{_HOST_NC}):(?:\s|$)
  )
  # the program's own header inside the syslog message: `time [category:] level: ` taken off; without
  # a time of its own the level is read and the message kept whole (`sshd[9]: error: kex failed`)
  (?:(?:{shapes()})\s+(?:[\w.-]{{1,40}}:\s+)?(?P<lvy>{BARE_LEVEL}):\s+|(?=(?:[\w.-]{{1,40}}:\s+)?(?P<lvz>{BARE_LEVEL})(?::\s|(?<=[A-Z])\s(?=\S))))?
|
  # after any other time, a program and its pid (a host before them): `ts host kernel[0]: `, `[epoch] unbound[7:0] `;
  # its bare `level: ` read and kept in the message, as syslog's
  (?(ts)(?=(?:[^\s\[]++\s++)?[^\s\[]++\[\d)(?!{LEVEL_WORD}[:\[\s])(?:(?P<hostg>{_HOST})(?<!:)\s+(?!{LEVEL_WORD}[:\[\s]))?(?P<progg>{_PROG})\[(?P<pidg>\d+)(?::\d+)?\]
    (?::(?:\s|$)|\s+(?={BARE_LEVEL}:\s))
    (?=(?P<lvg>{BARE_LEVEL}):\s)?|(?!))
|
  # the rest of an application's header: pid, host or context, tags, level, tags, logger
  (?:\d{{1,3}}(?:\.\d{{1,2}})?%\s+)?
  (?:(?P<pidt>\d{{1,7}})(?:\s+(?P<tid>\d{{1,7}}))?\s+(?=\S)|\d{{8,20}}\s+(?=\S))?
  (?(ts)(?:
    [\w.$-]{{1,80}}\s+-\s+(?={_LEVEL_TOKEN})
  | [\w.-]{{1,80}}+\s++(?=\({LEVEL_WORD}\):?\s)
  | (?:[\w.-]{{1,40}}+=[^\s=]{{0,80}}+\s++){{1,8}}(?=\[{LEVEL_WORD}\])
  | (?!{LEVEL_WORD}\s|\S*:\d+\s)(?P<hostl>{_HOST})(?<!:)\s+(?!\()(?=(?:\S++\s+){{0,2}}{_LEVEL_TOKEN})
  | {_SKIP_CTX}(?P<ctx>(?:\S++\s+){{1,6}}?|(?:\S++\s+){{0,8}}?\S{{0,200}}?[>\]:])(?=[A-Z]{{3,}}:\s)
  | \S{{1,200}}?[>\]:)]\s+(?={BARE_LEVEL}:\s)
  )??)
  (?P<tags>(?:{_TAG_ANY}\s*){{0,12}})(?:-\s+(?={_LEVEL_TOKEN}))?
  (?:(?P<comp1>(?:[A-Z][A-Z_]+\s+){{1,2}}))??
  (?:[\w.-]{{1,60}}+(?=\[{LEVEL_WORD}\]:))?
  (?P<lvl>{_LEVEL_TOKEN}
    |{_LEVEL_SLASH}(?=/[\w.-]{{1,60}}:\s)
    |[VDIWEFA](?P<ls>)(?=/[^\s(:/]{{1,80}}\(\s*\d+\):\s)
    |(?(ts)[DIWEF](?P<one>)(?=\s+(?:[A-Z][A-Z_]*|-)\s)|(?!))
    |(?(tid)[VDIWEFA](?P<lc>)(?=\s+[^:]{{1,80}}:\s)|(?!)))
  (?(one)\s+(?:[A-Z][A-Z_]*|-)(?=\s))
  (?(lc)\s+[^:]{{1,80}}:(?=\s))
  (?(ls)/[^\s(:/]{{1,80}}\(\s*(?P<pidl>\d+)\):)
  :?(?:\s+[-|:]\s+|\s+|(?=\[)|$|(?<=:)[\w.]+:\s*|/[\w.-]{{1,60}}:\s+)
  (?:\((?P<pidq>\d{{1,7}})(?:\ on\ (?P<hostq>[^()\s]{{1,80}}))?\)\s*:\s+)?
  (?:\d{{1,7}}\s+---\s+)?
  (?:(?:{_TAG_ANY}\s*){{1,12}}(?={_LOGGER}|-\s))?
  (?P<tags2>(?:(?:{_TAG_ONE}|{_MDC}|{_THREAD})\s*){{0,12}})(?:(?<=\]):\s+)?
  (?(lc)|(?:(?P<lgr>{_LOGGER})(?:\[[^\]]*\]\s+)?)?)
  (?:-\s+)?
  (?P<fields>(?:{_ERRNO})?(?:{_KV}\s*(?:{_TAG}\s*)*)*(?:{_ERROR_ID}\s+)?)
|
  # after `ts|`: up to three more `field|` (`ts|component|pid|message`)
  (?<=\|)(?:(?P<lvp>{LEVEL_WORD})\|(?:[^|\s]{{1,80}}\|){{0,2}}|(?:[^|\s]{{1,80}}\|){{1,3}})\s*
|
  # keyed fields after the time, one of them the host: `Process(1.1) User(u) Host(h) `
  (?(ts)(?:[A-Z]\w{{0,30}}\([^()\s]{{0,80}}\)\s+){{0,8}}?Host\((?P<hostk>[^()\s]{{1,80}})\)(?:\s+[A-Z]\w{{0,30}}\([^()\s]{{0,80}}\))*\s+|(?!))
|
  # a source location after a time without a level (`2023/01/12 10:01:22.123456 server.go:42: `)
  (?(ts)[\w./-]{{1,80}}\.[a-z]{{1,4}}:\d{{1,6}}:\s+|(?!))
|
  # a program and ` - ` (`[MM.dd hh:mm:ss] prog.exe - message`)
  (?(ts)[\w.-]{{1,60}}(?:\ \*\d{{1,3}})?\ -\ |(?!))
|
  # RFC 3164: a host before a message without a tag
  {_SY_BARE}(?!{LEVEL_WORD}\s)(?P<hosts>{_HOST})(?<!:)\s+
)?)
(?=(?:\S++\s+){{0,2}}CEF:\d+(?:\|(?:[^|\\\n]|\\.)*){{5}}\|(?P<lvcef>[^|\\\n]{{1,20}})\|)?
(?P<msg>.*)$"""


def _compact(grammar: str) -> str:
    """The grammar above as one pattern: lines joined, indentation and `#` comment lines dropped."""
    lines = (ln.replace("\\ ", "[ ]").strip() for ln in grammar.split("\n"))
    return "".join("|" + ln[2:] if ln.startswith("| ") else ln for ln in lines if not ln.startswith("# "))


def rewrite(pattern: str, escape: Callable[[str, bool], str], whole: dict[str, str] | None = None) -> str:
    """`pattern` with each escape (`\\x`) written escape(it, inside a class), and outside classes each text of
    `whole` written as its value (a class that opens with `]` read as one)."""
    out, in_class, i = [], False, 0
    firsts = {w[0] for w in whole} if whole else set()
    while i < len(pattern):
        c = pattern[i]
        if c in firsts and not in_class:
            hit = next((w for w in whole if pattern.startswith(w, i)), None)
            if hit is not None:
                out.append(whole[hit])
                i += len(hit)
                continue
        if c == "\\":
            out.append(escape(pattern[i:i + 2], in_class))
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            if pattern[i + 1:i + 2] == "]" or pattern[i + 1:i + 3] == "^]":   # a class that opens with `]`
                out.append(pattern[i:i + 2])
                i += 2
                continue
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def _one_line(pattern: str) -> str:
    """`\\s` outside character classes as `[^\\S\\n]`: no part of a line's header reads into the next line."""
    return rewrite(pattern, lambda pair, in_class: "[^\\S\\n]" if pair == "\\s" and not in_class else pair)


def _optional_as_branch(pattern: str) -> str:
    """Every optional group `(...)?` written `(?:...|)` and `(...)??` written `(?:|...)`: the same strings in the same
    order of preference, so the same match. Python's engine runs an optional group as a repeat, saving and
    restoring every group's marks at each step inside it; an alternation with an empty branch does not, which makes
    a miss about a quarter cheaper in this grammar (the possessive `?+` and single characters stay as written)."""
    out: list[list[str]] = [[]]          # one buffer per open group
    i, in_class, n = 0, False, len(pattern)
    while i < n:
        c = pattern[i]
        step = 1
        if c == "\\":
            step = 2
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            step = 2 if pattern[i + 1:i + 2] == "]" else 3 if pattern[i + 1:i + 3] == "^]" else 1   # `[]..]`, `[^]..]`
        elif c == "(" and len(out) > 1 and out[-1] == ["?"]:       # a condition's group reference: `(?(name)`
            step = pattern.index(")", i) + 1 - i
        elif c == "(":
            out.append([])
            i += 1
            continue
        elif c == ")":
            body = "".join(out.pop())
            group = f"({body})"
            q = pattern[i + 1:i + 3]
            if q[:1] == "?" and q[1:2] != "+":
                inner = body[2:] if body.startswith("?:") else group
                lazy = q[1:2] == "?"
                group = f"(?:|{inner})" if lazy else f"(?:{inner}|)"
                i += 1 + lazy
            out[-1].append(group)
            i += 1
            continue
        out[-1].append(pattern[i:i + step])
        i += step
    return "".join(out[0])


HEADER = re.compile(_optional_as_branch(_one_line(_compact(_GRAMMAR))), re.M)
# an access log's status after its request: the quoted request of a CLF-timed line (`"GET / HTTP/1.1" 404`,
# `"-" 400`), or on any timed line a request (a method and a target) then, past at most one short field, the status
# (REQUEST: where a request may start, searched for first; STATUS[""] is matched there)
_QUOTED_STATUS = r'"[^"]*" (\d{3})(?![^\s,;|])'
REQUEST = re.compile(r'(?:GET|POST|PUT|HEAD|DELETE|PATCH|OPTIONS|CONNECT|TRACE|PROPFIND) "?/')
STATUS = {"access": re.compile(_QUOTED_STATUS),
          "": re.compile(r'(?<![^\s"\[(])[A-Z]+ "?[^\s"]+"?(?: HTTP/\d(?:\.\d)?"?)?(?: -?\d{1,2}| -)? (\d{3})(?![^\s,;|])')}
# a log4j logger written after the message (`%m (%c)%n`): `... (org.acme.cluster.Elector)`, no part of the message
TRAILER = re.compile(r"[ \t]+\((?:[a-z_$][\w$]*\.){2,}[A-Z][\w$]*\)\Z")

LEVEL_GROUPS = ("lvk", "lvr", "lve", "lvb", "lvc", "lvq", "lvx", "lvf", "lvo", "lvs", "lvy", "lvz", "lvg", "lvl", "lvp",
                "lvcef")   # where a level token may stand
_TOKEN_WORD = re.compile(rf"[\[<(]?\s*(?:[\w.]*:|[a-z][\w-]*\.)?({LEVEL_WORD}|[VDIWEFAN])")


def level_token(token: str) -> str:
    """The level word of a level token (`[mod:error]` -> `error`, `<warn>` -> `warn`)."""
    m = _TOKEN_WORD.match(token)
    return m.group(1) if m else ""
