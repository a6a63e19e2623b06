"""The stages' frozen configs, each built here, in one place, from the settings: every stage carries only
the fields it uses (worker/pipeline/app.py builds the worker with these; tests build stages with them)."""

from __future__ import annotations

from worker.kafka.config import offset_reset
from worker.pipeline.backpressure import Watermarks
from worker.pipeline.delivery import DeliveryConfig
from worker.pipeline.finishing import FinishingConfig
from worker.pipeline.ingest import IngestConfig
from worker.redaction import Policy

LAG_INTERVAL_S = 5.0  # how often ingest exports consumer lag and reports each partition's progress


def ingest_config(settings, watermarks: Watermarks) -> IngestConfig:
    """`settings`: worker.config.settings.Settings."""
    k, pl = settings.kafka, settings.pipeline
    return IngestConfig(
        watermarks=watermarks, input_topics=tuple(k.input_topics), offset_reset=offset_reset(k),
        poll_batch=pl.poll_batch, max_message_bytes=k.max_message_bytes, lag_interval_s=LAG_INTERVAL_S,
        hold_warning_s=k.delivery_stuck_s, stall_timeout_s=pl.stall_timeout_s,
        preprocess_processes=pl.preprocess_processes, max_document_bytes=pl.max_document_bytes,
        highlights=settings.digest.highlights, redaction=Policy.of(settings.redaction), digest=settings.digest,
        windowing=settings.windowing if settings.windowing.enabled else None)


def finishing_config(settings, model_name: str) -> FinishingConfig:
    """`model_name`: the outputs' `model`."""
    return FinishingConfig(output_topic=settings.kafka.output_topic, model_name=model_name, mode=settings.model.mode,
                           highlights=settings.digest.highlights, grounding=settings.generation.grounding)


def delivery_config(settings) -> DeliveryConfig:
    k = settings.kafka
    return DeliveryConfig(output_topic=k.output_topic, dlq_topic=k.dlq_topic, exactly_once=k.delivery == "exactly_once",
                          txn_call_timeout_s=k.delivery_stuck_s / 12, delivery_stuck_s=k.delivery_stuck_s)
