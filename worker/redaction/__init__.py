"""Secrets out of everything the worker publishes (summaries, digests, highlights, prompts, spans, logs).

    redactor(policy).text(s) -> (s', {kind: count})   worker/redaction/redact.py: the pass
    scrub(s) -> s'                                     the same with the policy `install` set at start
    scrub_tree(obj)                                    every string of a JSON-like value (input attributes)
    scrub_headers(headers)                             record headers for the output topic
    dead_letter_value(b)                               a dead letter's value (redacted only with redaction.dead_letters)
    Policy.of(settings.redaction)                      worker/redaction/policy.py
The rules (detect-secrets' provider patterns and Ribbon's own) are in worker/redaction/rules.py, the
Hyperscan screen that says where in a document their prefilter can match in worker/redaction/screen.py;
docs/digest.md says what is redacted, where, and what it costs.
"""

from worker.redaction.policy import Policy
from worker.redaction.redact import dead_letter_value, install, redactor, scrub, scrub_headers, scrub_tree

__all__ = ["Policy", "dead_letter_value", "install", "redactor", "scrub", "scrub_headers", "scrub_tree"]
