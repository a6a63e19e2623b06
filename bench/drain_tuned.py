"""Drain3 configured as the Loghub benchmark configures Drain: per system depth, similarity threshold and
the masking regexes of its benchmark settings (logpai/loghub-2.0, the 2k samples), every match masked `<*>`.

    drain_templates(system, contents) -> (template per line, process seconds)
    drain3_miner(**fields)            -> a Drain3 TemplateMiner (its defaults, or these config fields)

The settings are the benchmark's published parameters (facts about that configuration, written here as
data); a system it has no setting for gets Drain's defaults (depth 4, threshold 0.5, no masking).
Drain3 (the maintained successor of the benchmark's Drain, the [bench] extra) parses the lines in one
pass; each line gets its cluster's final template, as the benchmark writes them after the pass.
"""

from __future__ import annotations

import time

# system -> (depth, similarity threshold, masking regexes)
SETTINGS: dict[str, tuple[int, float, tuple[str, ...]]] = {
    "HDFS": (4, 0.5, (r"blk_-?\d+", r"(\d+\.){3}\d+(:\d+)?")),
    "Hadoop": (4, 0.5, (r"(\d+\.){3}\d+",)),
    "Spark": (4, 0.5, (r"(\d+\.){3}\d+", r"\b[KGTM]?B\b", r"([\w-]+\.){2,}[\w-]+")),
    "Zookeeper": (4, 0.5, (r"(/|)(\d+\.){3}\d+(:\d+)?",)),
    "BGL": (4, 0.5, (r"core\.\d+",)),
    "HPC": (4, 0.5, (r"=\d+",)),
    "Thunderbird": (4, 0.5, (r"(\d+\.){3}\d+",)),
    "Windows": (5, 0.7, (r"0x.*?\s",)),
    "Linux": (6, 0.39, (r"(\d+\.){3}\d+", r"\d{2}:\d{2}:\d{2}")),
    "Android": (6, 0.2, (r"(/[\w-]+)+", r"([\w-]+\.){2,}[\w-]+",
                         r"\b(\-?\+?\d+)\b|\b0[Xx][a-fA-F\d]+\b|\b[a-fA-F\d]{4,}\b")),
    "HealthApp": (4, 0.2, ()),
    "Apache": (4, 0.5, (r"(\d+\.){3}\d+",)),
    "Proxifier": (3, 0.6, (r"<\d+\ssec", r"([\w-]+\.)+[\w-]+(:\d+)?", r"\d{2}:\d{2}(:\d{2})*", r"[KGTM]B")),
    "OpenSSH": (5, 0.6, (r"(\d+\.){3}\d+", r"([\w-]+\.){2,}[\w-]+")),
    "OpenStack": (5, 0.5, (r"((\d+\.){3}\d+,?)+", r"/.+?\s", r"\d+")),
    "Mac": (6, 0.7, (r"([\w-]+\.){2,}[\w-]+",)),
}
DEFAULT = (4, 0.5, ())


def drain3_miner(**fields):
    """A Drain3 TemplateMiner with profiling off and these fields of its TemplateMinerConfig (Drain3's
    names: drain_depth, drain_sim_th, masking_instructions, ...; none: its defaults). The fields are set
    by name, as Drain3's own config loader sets them, and only Drain3 reads them."""
    from drain3 import TemplateMiner  # noqa: PLC0415 optional dependency (the [bench] extra)
    from drain3.template_miner_config import TemplateMinerConfig  # noqa: PLC0415 the [bench] extra

    cfg = TemplateMinerConfig()
    for name, value in {"profiling_enabled": False, **fields}.items():
        if not hasattr(cfg, name):
            raise AttributeError(f"TemplateMinerConfig has no field {name!r}")
        setattr(cfg, name, value)
    return TemplateMiner(config=cfg)


def drain_templates(system: str, contents: list[str]) -> tuple[list[str], float]:
    """Tuned Drain3 over the lines' contents: (its template per line, process CPU seconds of the pass)."""
    from drain3.masking import MaskingInstruction  # noqa: PLC0415 optional dependency (the [bench] extra)

    depth, st, regexes = SETTINGS.get(system, DEFAULT)
    miner = drain3_miner(drain_depth=depth, drain_sim_th=st, mask_prefix="<", mask_suffix=">",
                         masking_instructions=[MaskingInstruction(r, "*") for r in regexes])
    t0 = time.process_time()
    ids = [miner.add_log_message(c)["cluster_id"] for c in contents]
    seconds = time.process_time() - t0
    by_id = {c.cluster_id: c.get_template() for c in miner.drain.clusters}
    return [by_id[i] for i in ids], seconds
