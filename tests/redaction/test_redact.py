"""The redaction pass: each class the issue names is redacted (value only, line kept), look-alikes stay.

The secrets below are made up here, in the providers' documented shapes; none is a live credential.
"""

from __future__ import annotations

import pytest

from worker.config.settings import SettingsError, load_settings
from worker.redaction import Policy, redactor, scrub_headers, scrub_tree

R = redactor(Policy())
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def red(line: str) -> tuple[str, dict[str, int]]:
    return R.text(line)


@pytest.mark.parametrize("line, kept, kind", [
    ("login failed password=hunter2 from 10.1.2.3", "password=<redacted:password> from 10.1.2.3", "password"),
    ('{"user": "bob", "Password": "p@ss w0rd!"}', '"Password": "<redacted:password>"}', "password"),
    ('msg="db up" db_passwd="s3cr3t" retries=3', 'db_passwd="<redacted:password>" retries=3', "password"),
    ("API_KEY: 9b1c4e2f7a", "API_KEY: <redacted:api_key>", "api_key"),
    ("client_secret=Zm9vYmFyYmF6", "client_secret=<redacted:secret>", "secret"),
    ("GET /cb?access_token=ya29xyz123&state=4", "access_token=<redacted:token>&state=4", "token"),
    ("Authorization: Bearer abc123def456ghi", "Authorization: Bearer <redacted:bearer_token>", "bearer_token"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic <redacted:basic_auth>", "basic_auth"),
    (f"token {JWT} expired", "token <redacted:jwt> expired", "jwt"),
    (f"using key {AWS_ID} now", "using key <redacted:aws_key> now", "aws_key"),
    ("gcp key AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q" + " ok", "gcp key <redacted:gcp_key> ok", "gcp_key"),
    ("AccountName=x;AccountKey=" + "a" * 86 + "==;EndpointSuffix=core", "AccountKey=<redacted:", None),
    (f"clone with {GH} done", "clone with <redacted:github_token> done", "github_token"),
    ("push glpat-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn" + " ok", "push <redacted:gitlab_token> ok", "gitlab_token"),
    ("slack xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack <redacted:slack_token>",
     "slack_token"),
    ("dsn postgres://app:s3cr3t@db.local:5432/x", "postgres://app:<redacted:connection_string>@db.local:5432/x",
     "connection_string"),
    ("api key 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c used", "api key <redacted:high_entropy> used", "high_entropy"),
])
def test_each_class_loses_its_value_and_keeps_the_rest_of_the_line(line, kept, kind):
    out, counts = red(line)
    assert kept in out
    assert sum(counts.values()) >= 1 and (kind is None or counts.get(kind) == 1)


@pytest.mark.parametrize("line", [
    "081109 203615 148 INFO dfs.DataNode$PacketResponder: Received block blk_-1608999687919862906 of size 91178",
    "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 commit 3e1f2a9c",
    "request 123e4567-e89b-12d3-a456-426614174000 at 0x7ffd5fbff8a0 took 12 ms",
    "max_tokens=512 tokens: 40 token=5 password=null secret=*** api_key=<unset> pwd=${DB_PASSWORD}",
    "sudo: alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/bin/ls",
    "Bearer authentication failed; basic configuration loaded",
    "Authorization: Digest username=alice realm=api",
])
def test_look_alikes_and_placeholders_stay(line):
    assert red(line) == (line, {})


def test_a_private_key_block_keeps_its_lines_and_markers():
    text = "\n".join(["boot ok", "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo",
                      "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0", "-----END RSA PRIVATE KEY-----", "done"])
    out, counts = red(text)
    assert out.split("\n") == ["boot ok", "-----BEGIN RSA PRIVATE KEY-----", "<redacted:private_key>",
                               "<redacted:private_key>", "-----END RSA PRIVATE KEY-----", "done"]
    assert counts == {"private_key": 1}
    one_line = ('{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n'
                '-----END PRIVATE KEY-----\\n"}')
    out, counts = red(one_line)
    assert "MIIEvQ" not in out and counts == {"private_key": 1}


def test_lines_and_offsets_hold_in_text_that_is_not_ascii():
    text = "température élevée ✓\nmot de passe password=geheim ✓ fin\nsuite ✓"
    out, counts = red(text)
    assert out == "température élevée ✓\nmot de passe password=<redacted:password> ✓ fin\nsuite ✓"
    assert counts == {"password": 1}


def test_extra_patterns_and_allowed_keys():
    r = redactor(Policy(extra_patterns=(("employee_id", r"\bEMP-(\d{6})\b"),), allowed_keys=frozenset({"csrf_token"})))
    out, counts = r.text("user EMP-123456 csrf_token=abc123456 session_token=zz9911")
    assert out == "user EMP-<redacted:employee_id> csrf_token=abc123456 session_token=<redacted:token>"
    assert counts == {"employee_id": 1, "token": 1}


def test_disabled_changes_nothing():
    line = "password=hunter2"
    assert redactor(Policy(enabled=False)).text(line) == (line, {})


def test_attributes_under_credential_keys_are_redacted():
    assert scrub_tree({"api_key": "k-1234567", "env": "prod", "nested": [f"t {GH}"]}) == \
        {"api_key": "<redacted:api_key>", "env": "prod", "nested": ["t <redacted:github_token>"]}


def test_settings_round_trip_and_a_bad_pattern_names_its_setting():
    s = load_settings(environ={"RIBBON_REDACTION__EXTRA_PATTERNS": '{"ticket": "T-(\\\\d+)"}',
                               "RIBBON_REDACTION__ALLOWED_KEYS": "csrf_token,Token_Type"})
    p = Policy.of(s.redaction)
    assert p.enabled and p.extra_patterns == (("ticket", r"T-(\d+)"),)
    assert p.allowed_keys == {"csrf_token", "token_type"}
    with pytest.raises(SettingsError) as e:
        load_settings(environ={"RIBBON_REDACTION__EXTRA_PATTERNS": '{"x": "("}'})
    assert "redaction.extra_patterns" in str(e.value) and "RIBBON_REDACTION__EXTRA_PATTERNS" in str(e.value)


def test_output_headers_lose_credentials_and_keep_the_trace():
    tp = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    got = scrub_headers([("traceparent", tp), ("authorization", b"Bearer abc123def456ghi"), ("x-api-key", b"k-99a7"),
                         ("bin", b"\xff\xfe"), ("empty", None)])
    assert got == (("traceparent", tp), ("authorization", b"Bearer <redacted:bearer_token>"),
                   ("x-api-key", b"<redacted:api_key>"), ("bin", b"\xff\xfe"), ("empty", None))


@pytest.mark.parametrize("unit", ["AKIA", "AKIAZ7Q2", "ghp_"])
def test_a_token_of_many_matches_is_one_secret_read_once(monkeypatch, unit):
    """Each match of a rule inside one long token would extend to the token's end (quadratic in its length):
    a match inside a span already taken is not read again."""
    from worker.redaction import rules

    calls = []
    line = "key " + unit * 2000 + " end"
    red = rules.build_rules(Policy())   # fresh rules whose span functions count their calls
    counted = tuple(rules.Rule(r.family, r.regex, lambda m, f=r.span: calls.append(1) or f(m)) for r in red.line)
    monkeypatch.setattr(R, "rules", type(red)(red.prefilter, red.families, red.names, red.extra, counted))
    out, found = R.text(line)
    assert out.startswith("key <redacted:") and out.endswith(" end") and sum(found.values()) == 1
    assert len(calls) <= 10
