"""The redaction rules: which spans of a line are secrets, and of which kind.

    build_rules(policy) -> Rules: the ordered line rules, the one prefilter and the families that gate them,
                               and the document screen (worker/redaction/screen.py) in front of the prefilter

Provider token formats come from detect-secrets (Yelp, Apache-2.0): the `denylist` regular expressions
of its regex plugins (AWS, Azure storage, GitHub, GitLab, Slack, JWT, Stripe, SendGrid, npm, PyPI,
OpenAI, Discord, Telegram, Twilio, Mailchimp, Square, IBM, Cloudant, SoftLayer, Artifactory), read
from the installed package, so its maintained rule set is the one applied. Its credential words
(`keyword.DENYLIST`) seed the key=value rule. Its IP and file-type keyword plugins are left out (an
address is not a credential; its keyword regexes are per source language), and so are its
high-entropy plugins as rules (they flag every quoted hash); their Shannon entropy is used for the
"high-entropy token next to a credential word" rule. Written here, because detect-secrets has no
rule for them or none that gives the value's span: key=value and JSON/logfmt fields (the value
only), bearer/basic authorization, connection strings with a password, private key blocks
(worker/redaction/redact.py), Google API keys and OAuth tokens, GitHub fine-grained tokens.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import re2
from detect_secrets.plugins import keyword as ds_keyword
from detect_secrets.plugins.base import RegexBasedDetector

from worker.redaction.policy import Policy
from worker.redaction.screen import Screen, document_screen

# detect-secrets plugins applied (module, class); the rest are left out, as the docstring says
_DS_PLUGINS = (
    ("artifactory", "ArtifactoryDetector"), ("aws", "AWSKeyDetector"), ("azure_storage_key", "AzureStorageKeyDetector"),
    ("cloudant", "CloudantDetector"), ("discord", "DiscordBotTokenDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("ibm_cloud_iam", "IbmCloudIamDetector"),
    ("ibm_cos_hmac", "IbmCosHmacDetector"), ("jwt", "JwtTokenDetector"), ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"), ("openai", "OpenAIDetector"), ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"), ("slack", "SlackDetector"), ("softlayer", "SoftlayerDetector"),
    ("square_oauth", "SquareOAuthDetector"), ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"), ("twilio", "TwilioKeyDetector"),
)
_KIND = {"JSON Web Token": "jwt", "AWS Access Key": "aws_key", "Azure Storage Account access key": "azure_key"}

# Words that make `key = value` a credential: detect-secrets' DENYLIST and the issue's list.
_WORDS = sorted({w.replace("_?", "[_-]?") for w in ds_keyword.DENYLIST} | {
    "passphrase", "pass", "token", "api[_-]?token", "secret[_-]?key", "access[_-]?key", "signing[_-]?key",
    "master[_-]?key", "encryption[_-]?key", "shared[_-]?access[_-]?key", "authorization", "credentials?",
    "private[_-]?key[_-]?id",
}, key=len, reverse=True)
_PASSWORD = re.compile(r"(?i)pass|pwd|contrase")
_WORD_RX = "|".join(_WORDS)
_SEP = r"(?P<kq>\\?[\"']?)\s{0,3}(?::=|=>|=|:)\s{0,3}"
# a quoted value is looked for over 4,096 characters at most: a line of unclosed quotes costs linear time
_VALUE = r"(?:(?P<q>\\?[\"'])(?P<qv>.{0,4096}?)(?P=q)|(?P<v>[^\s,;&\"'}\])]+))"
# the key's last word, then the separator and the value; the key's start is found by scanning back (key_start)
KEY_VALUE = re.compile(r"(?i)(?P<word>" + _WORD_RX + ")" + _SEP + _VALUE)
_KEY_PREFIX = re.compile(r"[A-Za-z_]{3,}=")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# values that are no secret: empty words, masks, placeholders and templates, hex addresses, object reprs
_PLACEHOLDER = re.compile(r"(?i)(?:null|none|nil|true|false|undefined|n/a|-|\**|x+|\.+|<[^>]*>?|\[[^\]]*\]?|"
                          r"\$\{[^}]*\}?|(?-i:\$[A-Z_][A-Z0-9_]*)|\{\{.*|%[sdr]|\?+|[A-Za-z]+\{.*|0x[0-9a-fA-F]+|"
                          r"[A-Za-z_$][\w$.]*@[0-9a-f]{4,})")
_SCHEME = re.compile(r"(?i)bearer|basic|token|digest|negotiate|ntlm|hmac\S*|aws4-hmac-sha256|oauth")

AUTH_HEADER = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+(?P<v>[A-Za-z0-9._~+/-]{8,}=*)")
CONNECTION = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/?#@\"']+:(?P<v>[^\s@/\"']+)@[^\s/\"']")
GOOGLE = re.compile(r"\bAIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}")
GITHUB_PAT = re.compile(r"\bgithub_pat_[0-9A-Za-z_]{60,}")  # fine-grained tokens: not in detect-secrets 1.5
_NEAR = r"(?:password|passwd|secret|token|api[ _-]?key|access[ _-]?key|secret[ _-]?key|private[ _-]?key|credentials?)"
NEAR_WORD = re.compile(r"(?i)\b" + _NEAR + r"\b[\s\"'(\[]{1,3}(?P<v>[A-Za-z0-9+/=_.-]{16,})(?![\w+/=.-])")

# Necessary conditions of the rules above and of detect-secrets' patterns, by family of rules, as RE2
# expressions (linear time): their union scans a document's bytes once, and a line without a match is
# not looked at again; on a line that matches, the set of families says which rules run. In an ASCII
# document the union reads only the spans where Hyperscan finds them (worker/redaction/screen.py). Provider
# prefixes are case-sensitive, as their patterns are. detect-secrets' IBM, Cloudant and SoftLayer rules
# run where their vendor's name is on the line (a bare `key = <44 characters>` is the key=value rule's).
FAMILIES = {
    "key_value": r"(?i:" + _WORD_RX + r")\\?[\"']?\s{0,3}(?::=|=>|=|:)",
    "auth_header": r"(?i:bearer|basic)\s+[A-Za-z0-9._~+/-]{8}",
    "connection": r"://[^\s:/?#@\"']+:[^\s@/\"']+@",
    "near_word": r"(?i:" + _NEAR + r")[\s\"'(\[]{1,3}[A-Za-z0-9+/=_.-]{16}",
    "provider": "|".join((
        r"eyJ[A-Za-z0-9_=-]+\.|A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA|AKC[a-zA-Z0-9]{10}|AP[0-9A-F][a-zA-Z0-9]{8}",
        r"AIza|ya29\.|gh[pousr]_|github_pat_|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941|xox[abposr]-",
        r"hooks\.slack\.com|[rs]k_live_|SG\.|sq0csp-|pypi-Ag|T3BlbkFJ|-us[0-9]|AC[a-z0-9]{32}|SK[a-z0-9]{32}",
        r"[0-9]{8,10}:[0-9A-Za-z_-]{35}|[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.|AccountKey=|_authToken",
        r"(?i:aws).{0,20}(?i:key|pwd|pw|pass|token)|(?i:cloudant|softlayer|ibm|iam|cos|cloud|clou|cl|sl)[_-]?"
        r"(?i:api)?[_-]?(?i:key|pwd|pw|pass|token|secret)|://[^\s:/]+:[^\s@]+@[\w-]+\.cloudant\.com")),
    "private_key": r"PRIVATE KEY|PuTTY-User-Key",  # whole blocks, before the line rules (redact.py)
}
_WARM_BYTES = 65_536  # read once by the union when built (_prefilters): 6 ms at start


@dataclass(frozen=True)
class Rule:
    family: str                           # the FAMILIES entry that gates it ("extra": always run)
    regex: re.Pattern
    span: Callable[[re.Match], tuple[int, int, str] | None]  # the secret's (start, end, kind), or None: not one


@dataclass(frozen=True)
class Rules:
    prefilter: object                   # re2: the union of FAMILIES, one scan of a document
    families: object                    # re2.Set of FAMILIES, one search of a line: which rules run there
    names: tuple[str, ...]              # FAMILIES' names in the set's order
    extra: tuple[re.Pattern, ...]       # redaction.extra_patterns (each its own flags)
    line: tuple[Rule, ...]
    screen: Screen | None = None        # FAMILIES by Hyperscan: the spans of an ASCII document the union reads

    def families_of(self, line: str) -> set[str]:
        """The families whose conditions hold somewhere on `line` (and "extra")."""
        hit = self.families.Match(line.encode("utf-8", "replace")) or ()
        return {"extra", *(self.names[i] for i in hit)}


def _slug(secret_type: str) -> str:
    return _KIND.get(secret_type) or re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_").removesuffix("s")


def _group_or_whole(kind: str) -> Callable[[re.Match], tuple[int, int, str] | None]:
    """detect-secrets' span: its last group that took text when that is a value (8+ characters; a
    shorter group is a prefix like `ghp`), else the whole match; edge quotes, spaces, `=` and `:` off."""
    def span(m: re.Match) -> tuple[int, int, str] | None:
        s, e = m.span()
        for g in range(m.re.groups, 0, -1):
            if m.group(g) and len(m.group(g)) >= 8:
                s, e = m.span(g)
                break
        text = m.string
        key = _KEY_PREFIX.match(text, s, e)  # AccountKey=...: the key stays
        s = key.end() if key is not None else s
        while s < e and text[s] in " \t\"'=:":
            s += 1
        while e > s and text[e - 1] in " \t\"'":
            e -= 1
        while e < len(text) and (text[e].isalnum() or text[e] in "_-+/=."):  # the rest of the token
            e += 1
        while e > s and text[e - 1] == ".":
            e -= 1
        return (s, e, kind) if e > s else None
    return span


def _detect_secrets_rules() -> list[Rule]:
    import importlib  # noqa: PLC0415 - the plugin modules by name, once per process

    out = []
    for mod, cls in _DS_PLUGINS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{mod}"), cls)
        if not issubclass(plugin, RegexBasedDetector):
            raise TypeError(f"detect-secrets {cls} is not regex-based")
        kind = _slug(plugin.secret_type)
        out += [Rule("provider", rx, _group_or_whole(kind)) for rx in plugin.denylist]
    return out


def shannon_entropy(s: str) -> float:
    """Bits per character of `s` (detect-secrets' high-entropy plugins measure the same)."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def _high_entropy(m: re.Match) -> tuple[int, int, str] | None:
    """A token after a credential word: letters and digits mixed and near-random (entropy of at least
    3.5 bits per character, 3.0 for hex), or 20+ letters of both cases at 4.0; words and counters stay."""
    v = m.group("v")
    if any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
        floor = 3.0 if all(c in "0123456789abcdefABCDEF" for c in v) else 3.5
    elif len(v) >= 20 and any(c.islower() for c in v) and any(c.isupper() for c in v):
        floor = 4.0  # letters only: random mixed case, not CamelCase words
    else:
        return None
    return (*m.span("v"), "high_entropy") if shannon_entropy(v) >= floor else None


def _auth_header(m: re.Match) -> tuple[int, int, str] | None:
    v = m.group("v")
    if m.group("scheme").lower() == "basic":
        try:
            decoded = base64.b64decode(v + "=" * (-len(v) % 4), validate=True)
        except (binascii.Error, ValueError):
            return None
        return (*m.span("v"), "basic_auth") if b":" in decoded else None
    if not (any(c.isdigit() for c in v) or len(v) >= 20):  # "Bearer authentication failed" is prose
        return None
    return (*m.span("v"), "bearer_token")


def key_start(line: str, at: int) -> int:
    """Where the key that ends with the word at `at` begins (letters, digits, _ . - before it)."""
    while at > 0 and line[at - 1] in _KEY_CHARS:
        at -= 1
    return at


def _key_value(allowed: frozenset[str]) -> Callable[[re.Match], tuple[int, int, str] | None]:
    def span(m: re.Match) -> tuple[int, int, str] | None:
        key = m.string[key_start(m.string, m.start("word")):m.end("word")]
        if key.lower() in allowed:
            return None
        g = "qv" if m.group("q") is not None else "v"
        v = m.group(g)
        if not v or _PLACEHOLDER.fullmatch(v) or _SCHEME.fullmatch(v):
            return None
        low = key.lower()
        bare_pass = m.group("word").lower() == "pass"
        if bare_pass and low != "pass" and low[-5] not in "_.-":  # bypass=, compass=: not a password
            return None
        password = bool(_PASSWORD.search(low))
        if low.endswith("pwd") and v[:1] in "/~":  # PWD=/home/user is a directory (sudo, shells)
            return None
        if (bare_pass or not password) and v.isdigit() and len(v) < 6:  # token=5, pass=3: counts
            return None
        kind = "password" if password else "secret" if "secret" in low else "authorization" if "auth" in low \
            else "token" if "token" in low else "credential" if "credential" in low else "api_key"
        return (*m.span(g), kind)
    return span


def _extra(kind: str) -> Callable[[re.Match], tuple[int, int, str] | None]:
    def span(m: re.Match) -> tuple[int, int, str] | None:
        s, e = m.span(1) if m.re.groups else m.span()
        return (s, e, kind) if e > s else None
    return span


def build_rules(policy: Policy) -> Rules:
    """The line rules in the order they claim spans (a later rule skips text an earlier one took)."""
    extra = [(kind, re.compile(rx)) for kind, rx in policy.extra_patterns]
    line = [Rule("connection", CONNECTION, lambda m: (*m.span("v"), "connection_string")),
            Rule("provider", GOOGLE, _group_or_whole("gcp_key")),
            Rule("provider", GITHUB_PAT, _group_or_whole("github_token")),
            *_detect_secrets_rules(),
            Rule("auth_header", AUTH_HEADER, _auth_header),
            *[Rule("extra", rx, _extra(kind)) for kind, rx in extra],
            Rule("key_value", KEY_VALUE, _key_value(policy.allowed_keys)),
            Rule("near_word", NEAR_WORD, _high_entropy)]
    union, families = _prefilters()
    return Rules(union, families, tuple(FAMILIES), tuple(rx for _, rx in extra), tuple(line),
                 document_screen(tuple(FAMILIES.values())))


@functools.cache
def _prefilters() -> tuple[object, object]:
    """FAMILIES' union and set, once per process (they do not depend on the policy). RE2 builds a DFA's
    states as a scan first meets them: the union reads _WARM_BYTES of seeded random printable ASCII
    here, so that a process's first documents that it reads whole (text that is not ASCII, no hyperscan, a
    document of many screen reports) meet fewer new states."""
    families = re2.Set.SearchSet()
    for pattern in FAMILIES.values():
        families.Add(pattern.encode())
    families.Compile()
    union = re2.compile("|".join(f"(?:{p})" for p in FAMILIES.values()).encode())
    printable = bytes(range(32, 127)) + b"\n"
    warm = random.Random(0).randbytes(_WARM_BYTES).translate((printable * 3)[:256])
    for _ in union.finditer(warm):
        pass
    return union, families
