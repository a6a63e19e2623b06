"""The labelled corpus of bench/redaction.py: secrets (each with the substrings that must disappear) and
look-alikes (lines that must come out unchanged), built deterministically from a seed.

Sources:
- ggshield 1.56.1 (GitGuardian, MIT licence; its sdist on PyPI, ggshield-1.56.1/tests/unit/conftest.py and ggshield-1.56.1/tests/conftest.py):
  the test secrets its own unit tests feed its scanner, in the lines they appear in (a SendGrid key,
  GitGuardian test tokens, a GitHub token under `github_token:`, a Facebook app secret, an RSA private
  key block, a URL with a password). Copyright (c) GitGuardian, MIT licence: permission is granted to
  use, copy and modify with this notice kept.
- whispers 2.4.0 (Skyscanner/adeptex, BSD-3-Clause; its sdist on PyPI, whispers/rules/*.yml): the
  credential key names of its `passwords` and `apikey` rules and the known token prefixes of its
  `apikey-known` rule, used as generators (a random token of the provider's shape after the prefix).
  Copyright (c) the whispers authors, BSD-3-Clause: redistribution with this notice kept.
- The providers' documented token shapes for the classes issue 41 names (AWS, GCP, Azure, GitHub,
  GitLab, Slack, JWT, bearer/basic headers, connection strings), made up here from a seeded generator:
  no value below is a live credential.
Look-alikes are generated: HDFS block ids, md5/sha1/sha256 digests, hex addresses, UUIDs, trace and
span ids, container ids, ARNs, counters named like credentials, placeholders, prose.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

B62 = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Case:
    text: str
    label: str                 # "secret" (every `secrets` substring must go) or "lookalike" (unchanged)
    cls: str                   # the class it stands for (the results' rows)
    source: str                # ggshield | whispers | generated
    secrets: tuple[str, ...] = ()


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# --- ggshield 1.56.1 tests (MIT) --------------------------------------------------------------------------
_GG_TEST_TOKEN = ("8a784aab7090f6a4ba3b9f7a6594e2e727007a26590b58ed314e4b9ed4536479sRZlRup3xvtMVfiHWA"
                  "anbe712Jtc3nY8veZux5raL1bhpaxiv0rfyhFoAIMZUCh2Njyk7gRVsSQFPrEphSJnxa16SIdWKb03sRft"
                  "770LUTTYTAy3IM18A7Su4HjiHlGA9ihLj9ou3luadfRAATlKH6kAZwTw289Kq9uip67zxyWkUJdh6PTeFp"
                  "MgCh3AhHcZ21VeZHlu12345")
_GG_SG = "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"
_GG_KEY = """-----BEGIN RSA PRIVATE KEY-----
MIIBOgIBAAJBAIIRkYjxjE3KIZiEc8k4sWWGNsPYRNE0u0bl5oFVApPLm+uXQ/4l
bKO9LFtMiVPy700oMWLScwAN5OAiqVLMvHUCAwEAAQJANLr8nmEWuV6t2hAwhK5I
NNmBkEo4M/xFxEtl9J7LKbE2gtNrlCQiJlPP1EMhwAjDOzQcJ3lgFB28dkqH5rMW
TQIhANrCE7O+wlCKe0WJqQ3lYlHG91XWyGVgfExJwBDsAD9LAiEAmDY5OSsH0n2A
22tthkAvcN1s66lG+0DztOVJ4QLI2z8CIBPeDGwGpx8pdIicN/5LFuLWbyAcoZaT
bLaA/DCNPniBAiA0l//bzg+M3srIhm04xzLdR9Vb9IjPRlkvN074zdKDVwIhAKJb
RF3C+CMFb0wXme/ovcDeM1+3W/UmSHYUW4b3WYq4
-----END RSA PRIVATE KEY-----"""


def ggshield_cases() -> list[Case]:
    body = tuple(ln for ln in _GG_KEY.split("\n")[1:-1])
    return [
        Case(f'sg_key = "{_GG_SG}";', "secret", "sendgrid", "ggshield", (_GG_SG,)),
        Case(f'apikey = "{_GG_TEST_TOKEN}";', "secret", "key=value", "ggshield", (_GG_TEST_TOKEN,)),
        Case("github_token: 368ac3edf9e850d1c0ff9d6c526496f8237ddf91", "secret", "key=value", "ggshield",
             ("368ac3edf9e850d1c0ff9d6c526496f8237ddf91",)),
        Case("FacebookAppSecret = ce3f9f0362bbe5ab01dfc8ee565e4372;", "secret", "key=value", "ggshield",
             ("ce3f9f0362bbe5ab01dfc8ee565e4372",)),
        Case("GITGUARDIAN_API_KEY=ggtt-v-12345azert", "secret", "key=value", "ggshield", ("ggtt-v-12345azert",)),
        Case("fetch https://user:password@github.com:84/GitGuardian/ggshield.git", "secret", "connection string",
             "ggshield", (":password@",)),
        Case(_GG_KEY, "secret", "private key", "ggshield", body),
    ]


# --- whispers 2.4.0 rules (BSD-3-Clause) ------------------------------------------------------------------
# `passwords` rule keys and `apikey` rule keys (names ending in key/token), as whispers lists them
WHISPERS_KEYS = ("password", "passwd", "pass", "pwd", "secret", "api_key", "apikey", "access_key", "auth_token",
                 "access_token", "client_secret", "private_key", "secret_key", "db_password", "app_secret")
# `apikey-known` value prefixes with a token shape each (prefix, alphabet, length of the rest)
WHISPERS_KNOWN = (("ghp_", B62, 36), ("gho_", B62, 36), ("ghs_", B62, 36), ("AIza", B62 + "_-", 35),
                  ("glpat-", B62 + "_-", 20), ("xoxb-123456789012-1234567890123-", B62, 24),
                  ("xoxp-123456789012-1234567890123-", HEX, 32), ("sk_live_", B62, 24), ("rk_live_", B62, 24),
                  ("SG.", B62 + "_-", 22), ("pypi-AgEIcHlwaS5vcmc", B62 + "_-", 80), ("sq0csp-", B62 + "_-", 43),
                  ("NRAK-", string.ascii_uppercase + string.digits, 27), ("PMAK-", HEX, 59), ("whsec_", B62, 32),
                  ("glsa_", B62, 32), ("dt0c01.", string.ascii_uppercase + string.digits, 24))


def _jwt(rng: random.Random) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    sig = base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=")
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': _r(rng, B62, 8), 'iat': rng.randrange(10**9)})}.{sig}"


def _aws_id(rng: random.Random) -> str:
    return rng.choice(("AKIA", "ASIA")) + _r(rng, string.ascii_uppercase + "234567", 16)


def _aws_secret(rng: random.Random) -> str:
    return _r(rng, B62 + "/+", 40)


def _password(rng: random.Random) -> str:
    return rng.choice((_r(rng, string.ascii_lowercase, 7) + str(rng.randrange(100)),
                       _r(rng, B62 + "!@#%^*", rng.randrange(8, 20)), "hunter" + str(rng.randrange(10))))


def _one(text: str, *secrets: str) -> tuple[str, tuple[str, ...]]:
    return text, secrets


def _db(r: random.Random) -> str:
    return r.choice(("postgres", "mysql", "mongodb+srv", "redis", "amqp"))


def _known(r: random.Random) -> str:
    prefix, alphabet, n = r.choice(WHISPERS_KNOWN)
    return prefix + _r(r, alphabet, n)


def _basic(r: random.Random) -> str:
    return base64.b64encode(f"{_r(r, string.ascii_lowercase, 5)}:{_password(r)}".encode()).decode()


# (class, rng -> (text, the secret substrings)): each secret class in the line shapes logs carry it in
def _shapes(rng: random.Random):
    p, k = _password, lambda r: r.choice(WHISPERS_KEYS)  # noqa: E731
    return [
        ("key=value", lambda r: (lambda s: _one(f"login failed for admin {k(r)}={s} from 10.{r.randrange(255)}.1.3",
                                                s))(p(r))),
        ("key=value", lambda r: (lambda s: _one(f'{{"user": "u{r.randrange(99)}", "{k(r)}": "{s}", "ok": false}}',
                                                s))(p(r))),
        ("key=value", lambda r: (lambda s: _one(f'level=error msg="auth" {k(r).upper()}="{s}" n={r.randrange(9)}',
                                                s))(p(r))),
        ("key=value", lambda r: (lambda s: _one(f"  {k(r)}: {s}", s))(_r(r, B62, 24))),
        ("key=value", lambda r: (lambda s: _one(f'payload={{\\"token\\":\\"{s}\\",\\"n\\":1}}', s))(_r(r, B62, 30))),
        ("key=value", lambda r: (lambda s: _one(f"GET /oauth/cb?code=x1&access_token={s}&state=9 HTTP/1.1", s))(
            _r(r, B62, 32))),
        ("authorization", lambda r: (lambda s: _one(f"upstream 401 Authorization: Bearer {s}", s))(
            _r(r, B62 + "-._~", 40))),
        ("authorization", lambda r: (lambda s: _one(f'headers={{"authorization": "Bearer {s}"}}', s))(_jwt(r))),
        ("authorization", lambda r: (lambda s: _one(f"Authorization: Basic {s}", s))(_basic(r))),
        ("jwt", lambda r: (lambda s: _one(f"session {s} rejected: expired", s.split(".")[1]))(_jwt(r))),
        ("aws", lambda r: (lambda a, s: _one(f"WARN using key {a} secret={s}", a, s))(_aws_id(r), _aws_secret(r))),
        ("aws", lambda r: (lambda a: _one(f"credentials loaded from env: {a}", a))(_aws_id(r))),
        ("aws", lambda r: (lambda s: _one(f'aws_secret_access_key = "{s}"', s))(_aws_secret(r))),
        ("gcp", lambda r: (lambda s: _one(f"maps request key=AIza{s} quota ok", s))(_r(r, B62 + "_-", 35))),
        ("gcp", lambda r: (lambda s: _one(f'{{"type": "service_account", "private_key_id": "{s}"}}', s))(
            _r(r, HEX, 40))),
        ("gcp", lambda r: (lambda s: _one(f"oauth ya29.{s} refreshed", s))(_r(r, B62 + "_-", 60))),
        ("azure", lambda r: (lambda s: _one(f"DefaultEndpointsProtocol=https;AccountName=st{r.randrange(99)};"
                                            f"AccountKey={s};EndpointSuffix=core.windows.net", s))(
            _r(r, B62 + "+/", 86) + "==")),
        ("azure", lambda r: (lambda s: _one(f"Endpoint=sb://ns{r.randrange(9)}.servicebus.windows.net/;"
                                            f"SharedAccessKeyName=root;SharedAccessKey={s}", s))(
            _r(r, B62 + "+/", 43) + "=")),
        ("azure", lambda r: (lambda s: _one(f'client_secret: "{s}"', s))(_r(r, B62 + "~._-", 40))),
        ("github", lambda r: (lambda s: _one(f"git clone https://x-access-token:{s}@github.com/o/r", s))(
            "ghs_" + _r(r, B62, 36))),
        ("github", lambda r: (lambda s: _one(f"pushed with {s}", s))(
            r.choice(("ghp_", "gho_", "ghu_", "ghr_")) + _r(r, B62, 36))),
        ("github", lambda r: (lambda s: _one(f"GITHUB_TOKEN {s}", s))("github_pat_" + _r(r, B62 + "_", 82))),
        ("gitlab", lambda r: (lambda s: _one(f"runner registered glrt-{s}", s))(_r(r, B62 + "_-", 20))),
        ("gitlab", lambda r: (lambda s: _one(f"PRIVATE-TOKEN: glpat-{s}", s))(_r(r, B62 + "_-", 20))),
        ("slack", lambda r: (lambda s: _one(f"notify via xoxb-{r.randrange(10**11, 10**12)}-{s}", s))(
            f"{r.randrange(10**12, 10**13)}-{_r(r, string.ascii_lowercase + string.digits, 24)}")),
        ("slack", lambda r: (lambda s: _one(f"webhook https://hooks.slack.com/services/T{s}", s))(
            f"{_r(r, B62, 8)}/B{_r(r, B62, 8)}/{_r(r, B62, 24)}")),
        ("connection string", lambda r: (lambda s: _one(
            f"connecting to {_db(r)}://app:{s}@db-{r.randrange(9)}.internal:5432/main", f":{s}@"))(p(r))),
        ("connection string", lambda r: (lambda s: _one(f"Server=db;Database=x;User Id=sa;Password={s};", s))(p(r))),
        ("high entropy near a credential word", lambda r: (lambda s: _one(f"api key {s} accepted", s))(_r(r, HEX, 32))),
        ("high entropy near a credential word", lambda r: (lambda s: _one(f"rotated secret '{s}'", s))(_r(r, B62, 28))),
        ("private key", lambda r: (lambda b: _one("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(b)
                                                  + "\n-----END OPENSSH PRIVATE KEY-----", *b))(
            [_r(r, B62 + "+/", 70) for _ in range(4)])),
        ("known prefix (whispers)", lambda r: (lambda s: _one(f"token={s} used", s))(_known(r))),
    ]


def secret_cases(rng: random.Random, per_shape: int) -> list[Case]:
    out = ggshield_cases()
    for cls, make in _shapes(rng):
        for _ in range(per_shape):
            text, secrets = make(rng)
            out.append(Case(text, "secret", cls, "whispers" if "whispers" in cls else "generated", secrets))
    return out


def lookalike_cases(rng: random.Random, n: int) -> list[Case]:
    def uuid() -> str:
        return f"{_r(rng, HEX, 8)}-{_r(rng, HEX, 4)}-4{_r(rng, HEX, 3)}-a{_r(rng, HEX, 3)}-{_r(rng, HEX, 12)}"

    makers = {
        "block id": lambda: f"Received block blk_{rng.choice(('', '-'))}{rng.randrange(10**18, 10**19)} of size "
                            f"{rng.randrange(10**6)} from /10.250.{rng.randrange(255)}.{rng.randrange(255)}",
        "hash": lambda: rng.choice((f"sha256={_r(rng, HEX, 64)}", f"md5 {_r(rng, HEX, 32)} ok",
                                    f"commit {_r(rng, HEX, 40)} merged", f"etag: \"{_r(rng, HEX, 32)}\"",
                                    f"checksum: {_r(rng, HEX, 40)}")),
        "hex address": lambda: f"segfault at 0x{_r(rng, HEX, 12)} ip 0x{_r(rng, HEX, 12)} sp 0x{_r(rng, HEX, 12)}",
        "uuid": lambda: rng.choice((f"request_id={uuid()} status=200", f"trace_id={_r(rng, HEX, 32)} "
                                    f"span_id={_r(rng, HEX, 16)}", f"pod web-{_r(rng, HEX, 10)}-{_r(rng, HEX, 5)} "
                                    f"container {_r(rng, HEX, 64)} started", f"job {uuid()} done")),
        "arn and ids": lambda: f"assumed arn:aws:iam::{rng.randrange(10**11, 10**12)}:role/app-{rng.randrange(99)} "
                               f"RequestId: {uuid()}",
        "counter named like a credential": lambda: rng.choice((
            f"max_tokens={rng.randrange(4096)} tokens: {rng.randrange(999)}", f"token_count={rng.randrange(999)}",
            f"input_tokens: {rng.randrange(9999)}", f"token={rng.randrange(99)} retries", "keys=12 passes=3")),
        "placeholder": lambda: rng.choice(("password=*** user=bob", "secret: null", "api_key=<unset>",
                                           "password: '********'", "token=${API_TOKEN}", "pwd=$DB_PASSWORD",
                                           'password=""', "secret=[REDACTED]", "authorization: <redacted>")),
        "prose": lambda: rng.choice(("password reset requested for alice", "token expired for user bob",
                                     "Bearer authentication failed", "basic configuration loaded",
                                     "The secret store is unavailable; retrying", "invalid api key format",
                                     f"sudo: alice : TTY=pts/{rng.randrange(9)} ; PWD=/home/alice ; USER=root ; "
                                     "COMMAND=/bin/ls", "Authorization: Digest username=alice realm=api")),
        "base64 payload": lambda: f"chunk data={base64.b64encode(rng.randbytes(30)).decode()} seq={rng.randrange(99)}",
    }
    keys = sorted(makers)
    return [Case(makers[k](), "lookalike", k, "generated") for k in (keys[i % len(keys)] for i in range(n))]


def corpus(seed: int = 41, per_shape: int = 40, lookalikes: int = 2000) -> list[Case]:
    rng = random.Random(seed)
    return secret_cases(rng, per_shape) + lookalike_cases(rng, lookalikes)
