"""Per-document digest: format layer, line templates, levels and failures, time span, values, outliers.

    document.analyze_document(text) -> Analysis: structured forms (structured.py: OTLP logs as lines, the
                                     PM counter digest), the format layer (formats.py: escape sequences
                                     removed; each line's header read on its own by header.py: level,
                                     time, host), then one pass of the C++
                                     templater (ext/core/templater.hpp) over the messages, then the digest
    templates.analyze(lines)      -> Templates (per-line template ids, numbers, template summaries)
    digest.build_digest(tm, read) -> Analysis: the output message's `digest` object, levels per line
                                     (failures.py), ranked failures, the true span (clock.py), outliers
    compact.compact(...)          -> the document as the model sees it (each template once)
    prompt.digest_prompt(...)     -> a few digest lines, then the compacted text
    render.render(digest, meta)   -> the digest in plain English (digest mode's summary)
The highlight scorer (worker/digest/highlights.py) reads the same Templates.
Nothing here imports torch or touches Kafka.
"""
