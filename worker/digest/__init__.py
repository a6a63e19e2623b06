"""Per-document digest (issue 8): line templates, time span, severities, entities, outliers.

One pass of the C++ templater (ext/core/templater.hpp) feeds everything here:
    templates.analyze(lines)      -> Templates (per-line template ids, numbers, template summaries)
    digest.build_digest(...)      -> Digest (the output message's `digest` object)
    compact.compact(...)          -> the document as the model sees it (each template once)
    prompt.digest_prompt(...)     -> a few digest lines, then the compacted text
    render.render(digest, meta)   -> the digest in plain English (digest mode's summary)
The highlight scorer (worker/digest/highlights.py) reads the same Templates.
Nothing here imports torch or touches Kafka.
"""
