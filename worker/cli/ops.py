"""The operators' commands of `ribbon`: replay, validate, and `run --gpus` (parsers and handlers)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from worker.cli.args import load, topic_name
from worker.config.errors import EXIT_FAILED, StartupError, fail
from worker.kafka.config import kafka_client_config
from worker.messages.levels import ORDER as LEVELS  # the digest's levels, most severe first


def add_parsers(sub: Any, common: argparse.ArgumentParser, add_flags: Callable[..., None],
                run_parser: argparse.ArgumentParser) -> None:
    run_parser.add_argument(
        "--gpus", metavar="all|0,1,...",
        help="one worker process per GPU in the same group, each pinned to its device, under a supervisor "
             "that restarts a dead child and forwards SIGTERM (see docs/operating.md)")

    rp = sub.add_parser("replay", help="dead letters back to their input topic; bounded re-runs into another group")
    rsub = rp.add_subparsers(dest="replay_command", required=True, metavar="WHAT")
    dl = rsub.add_parser("dlq", parents=[common], help="produce dead letters back to the topic they came from")
    dl.add_argument("--error-class", action="append", default=[], metavar="CLASS",
                    help="only dead letters of this error.class (repeatable; default all)")
    dl.add_argument("--since", metavar="TIME", help="only records at or after TIME (ISO 8601 or epoch ms)")
    dl.add_argument("--until", metavar="TIME", help="only records before TIME (ISO 8601 or epoch ms)")
    dl.add_argument("--to-topic", metavar="TOPIC", type=topic_name,
                    help="produce here instead of each record's source.topic")
    dl.add_argument("--dry-run", action="store_true", help="count what would be replayed, produce nothing")
    dl.add_argument("--no-progress", action="store_true", help="no progress bar")
    dl.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds (default 60)")
    add_flags(dl, ["--bootstrap-servers", "--dlq-topic"])

    rr = rsub.add_parser("rerun", parents=[common],
                         help="run the worker over a past range of the input in a separate group, then stop")
    start = rr.add_mutually_exclusive_group(required=True)
    start.add_argument("--since", metavar="TIME", help="start at the first record at or after TIME")
    start.add_argument("--from-offset", type=int, metavar="N", help="start at offset N of every partition")
    rr.add_argument("--rerun-group", required=True, metavar="GROUP",
                    help="consumer group of the re-run; must not be the live kafka.group_id")
    rr.add_argument("--timeout", type=float, default=3600.0, help="give up after this many seconds (default 3600)")
    add_flags(rr, ["--bootstrap-servers", "--input-topic", "--output-topic", "--dlq-topic", "--group-id",
                   "--model", "--device", "--max-new-tokens", "--token-budget", "--log-level"])
    for action in rr._actions:  # the re-run's own dead-letter topic: never the live one
        if "--dlq-topic" in action.option_strings:
            action.help = ("dead-letter topic of the re-run (default: kafka.dlq_topic + '.rerun', made when "
                           "missing) [kafka.dlq_topic]")

    tl = sub.add_parser("tail", parents=[common],
                        help="print the summaries on the output topic (or the dead letters), one block each")
    tl.add_argument("--dlq", action="store_true", help="read the dead-letter topic (kafka.dlq_topic) instead")
    tl.add_argument("--topic", type=topic_name, help="read this topic (default: kafka.output_topic, or "
                                                     "kafka.dlq_topic with --dlq)")
    tl.add_argument("--follow", "-f", action="store_true", help="keep waiting for new records (Ctrl-C stops)")
    tl.add_argument("--key", help="only records with this Kafka key (a window's key, or a document's)")
    tl.add_argument("--min-severity", type=str.upper, choices=LEVELS, metavar="LEVEL",
                    help=f"only summaries whose digest counts a line this severe or worse ({', '.join(LEVELS)})")
    tl.add_argument("--json", action="store_true", help="one JSON object a line instead of readable blocks")
    tl.add_argument("--last", type=int, metavar="N", help="start at the last N records of each partition: "
                                                          "committed records, not offsets (default: from the "
                                                          "beginning)")
    tl.add_argument("--limit", type=int, metavar="N", help="stop after printing N records")
    tl.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker (default 10)")
    add_flags(tl, ["--bootstrap-servers", "--output-topic", "--dlq-topic"])

    va = sub.add_parser("validate", parents=[common],
                        help="check settings, model and tokenizer, broker, topics and the attention backend; "
                             "one line per check, exit 1 if any fails")
    va.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the broker (default 10)")
    add_flags(va, ["--bootstrap-servers", "--input-topic", "--output-topic", "--dlq-topic", "--model",
                   "--device", "--mode"])


def cmd_replay(args: argparse.Namespace) -> int:
    from worker.cli.preflight import probe_cluster  # noqa: PLC0415 confluent_kafka off --help
    from worker.cli.replay import DlqFilter, parse_time, replay_dlq  # noqa: PLC0415 confluent_kafka off --help

    settings = load(args)
    if not settings.kafka.bootstrap_servers:
        raise StartupError("kafka.bootstrap_servers", "replay needs a broker", "host:port[,host:port]")
    consumer_conf, producer_conf = kafka_client_config(settings.kafka)
    if args.replay_command == "rerun":
        from worker.cli.rerun import rerun  # noqa: PLC0415 the pipeline off --help

        return rerun(settings, args)
    to_topic = args.to_topic
    flt = DlqFilter(frozenset(args.error_class), parse_time(args.since) if args.since else None,
                    parse_time(args.until) if args.until else None)
    probe_cluster(producer_conf, min(args.timeout, 10.0))
    report = replay_dlq(consumer_conf, producer_conf, settings.kafka.dlq_topic, flt, to_topic,
                        args.dry_run, progress=not args.no_progress and sys.stderr.isatty(), timeout_s=args.timeout)
    print(report.line(args.dry_run))
    for target, n in sorted(report.by_target.items()):
        print(f"  {target}: {n}")
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    from worker.cli.preflight import probe_cluster  # noqa: PLC0415 confluent_kafka off --help
    from worker.cli.tail import TailOptions, tail  # noqa: PLC0415 confluent_kafka off --help
    from worker.kafka.config import client_config  # noqa: PLC0415 kept beside its only user

    settings = load(args)
    if not settings.kafka.bootstrap_servers:
        raise StartupError("kafka.bootstrap_servers", "tail needs a broker", "host:port[,host:port]")
    for flag in ("last", "limit"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            fail(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    config = client_config(settings.kafka)
    probe_cluster(config.common, min(args.timeout, 10.0))
    topic = args.topic or (settings.kafka.dlq_topic if args.dlq else settings.kafka.output_topic)
    opts = TailOptions(topic=topic, dead_letters=args.dlq, follow=args.follow, key=args.key,
                       min_severity=args.min_severity, as_json=args.json, last=args.last, limit=args.limit,
                       timeout_s=args.timeout)
    try:
        n = tail(config, opts)
    except LookupError as exc:
        setting = None if args.topic else "kafka.dlq_topic" if args.dlq else "kafka.output_topic"
        raise StartupError(setting, str(exc), "an existing topic") from None
    except RuntimeError as exc:
        raise StartupError(None, f"reading {topic}: {exc}", exit_code=EXIT_FAILED) from None
    if not args.json:
        print(f"{n} {'dead letters' if args.dlq else 'summaries'} from {topic}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from worker.cli.validate import run_checks  # noqa: PLC0415 confluent_kafka off --help

    settings = load(args)  # a bad setting: exit 2 with its line, as every command
    results = run_checks(settings, timeout_s=args.timeout)
    for ok, name, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return 0 if all(ok for ok, _, _ in results) else EXIT_FAILED


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"replay": cmd_replay, "validate": cmd_validate,
                                                              "tail": cmd_tail}
