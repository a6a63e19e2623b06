"""The `ribbon` command line (also `python -m worker`)."""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from pathlib import Path

from worker import __version__
from worker.cli import ops as cli_ops
from worker.cli.args import load, topic_name
from worker.cli.supervisor import run_supervisor
from worker.config.errors import EXIT_FAILED, EXIT_USAGE, OneLineParser, StartupError, fail
from worker.config.settings import SettingsError
from worker.engine.errors import EngineSettingError
from worker.kafka.broker import BrokerError, EmbeddedBroker
from worker.kafka.config import client_config, embedded_settings, kafka_client_config
from worker.observability.logs import setup_logging

# What this module imports is light: `ribbon --help` loads no Kafka client (confluent_kafka), pipeline
# or torch. Each handler imports the command modules it runs (worker.cli.preflight, produce, start,
# ...), which import what they need at their top; `ribbon run` loads no demo or benchmark code
# (tests/cli/test_product.py).

# The benchmarks are not in the wheel: they run from a source checkout (bench/, docs/architecture.md).
BENCH_ELSEWHERE = ("the benchmarks are not part of the `ribbon` command: run `python -m bench.<name>` "
                   "(e2e, steady, engine, quality, ...) from a source checkout")

# Flags that set a setting: flag -> (dotted setting path, help). They win over
# the environment and the config file.
SETTING_FLAGS: dict[str, tuple[str, str]] = {
    "--bootstrap-servers": ("kafka.bootstrap_servers", "Kafka bootstrap servers; unset starts the embedded broker"),
    "--input-topic": ("kafka.input_topics", "input topic(s), comma-separated"),
    "--output-topic": ("kafka.output_topic", "topic the summaries are produced to"),
    "--dlq-topic": ("kafka.dlq_topic", "dead-letter topic for bad input"),
    "--group-id": ("kafka.group_id", "consumer group id"),
    "--delivery": ("kafka.delivery", "exactly_once or at_least_once"),
    "--worker-slot": ("kafka.worker_slot", "stable index of this worker (transactional.id suffix)"),
    "--model": ("model.path", "model: a folder, a hub id, 'smollm2-135m' (the default; fetched and converted once) or 'tiny-random' (random weights: demo and benchmarks only)"),
    "--mode": ("model.mode", "generative (the model writes the summary) or digest (no model)"),
    "--compaction": ("digest.compaction", "true/false: give the model each line template once"),
    "--max-new-tokens": ("model.max_new_tokens", "tokens generated per summary at most"),
    "--device": ("model.device", "auto, cpu, cuda or cuda:N"),
    "--token-budget": ("packer.token_budget", "tokens per bin (prompt + reserve), or auto"),
    "--max-wait-ms": ("packer.max_wait_ms", "longest a bin waits to fill, in ms"),
    "--windowed": ("windowing.enabled", "true/false: input records are lines of a stream, summarized in windows per "
                                        "key (docs/windowing.md)"),
    "--window-key-field": ("windowing.key_field", "the windows' key: this field of a JSON record (unset: the Kafka "
                                                  "key)"),
    "--port": ("server.port", "metrics and health port (0 disables)"),
    "--log-level": ("log_level", "DEBUG, INFO, WARNING or ERROR"),
}


# Commands that need a running cluster say so instead (only `run` starts the embedded broker).
NEEDS_BROKER_HELP = {"--bootstrap-servers": "Kafka bootstrap servers of the cluster to use (required: this command "
                                            "starts no broker; `ribbon broker` runs a local one)"}


def _add_setting_flags(p: argparse.ArgumentParser, names: list[str]) -> None:
    for flag in names:
        path, text = SETTING_FLAGS[flag]
        if p.prog.split()[1:2] != ["run"]:
            text = NEEDS_BROKER_HELP.get(flag, text)
        p.add_argument(flag, dest="set_" + path.replace(".", "__"), metavar="VALUE", help=f"{text} [{path}]")


def _common() -> argparse.ArgumentParser:
    c = OneLineParser(add_help=False)
    c.add_argument("--config", metavar="PATH", help="settings file (TOML); default config/ribbon.toml if present")
    c.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="set any setting by its dotted name, e.g. --set packer.max_wait_ms=20 (repeatable)")
    return c


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ribbon", description="Summarize Kafka telemetry streams on a GPU, packed.")
    p.add_argument("--version", action="version", version=f"ribbon {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    pr = sub.add_parser("produce", parents=[_common()], help="send documents from a file to a topic")
    pr.add_argument("file", type=Path, help="input file")
    pr.add_argument("--topic", required=True, type=topic_name, help="topic to produce to")
    pr.add_argument("--timeout", type=float, default=10.0,
                    help="seconds to wait for the cluster to answer before giving up, exit 3 (default 10)")
    pr.add_argument("--split", default="jsonl",
                    help="jsonl: one JSON object per line (sent as is); blank: blank-line-separated blocks; "
                         "lines:N: N lines per document (default jsonl)")
    pr.add_argument("--source", help="`source` field of the documents built by blank/lines splits")
    pr.add_argument("--lines", action="store_true",
                    help="one record per line, sent as it is (a log shipper's stream, for windowing.enabled)")
    pr.add_argument("--key", help="with --lines: the key of every record")
    pr.add_argument("--key-field", help="with --lines: the key is this field of a JSON line (dotted path)")
    pr.add_argument("--key-regex", help="with --lines: the key is the first group (or group 'key') of this "
                                        "regular expression's match on the line; a line without a match (a stack "
                                        "frame) takes the key of the line before it")
    pr.add_argument("--rate", type=float, help="records per second at most (default: as fast as possible)")
    pr.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_setting_flags(pr, ["--bootstrap-servers"])

    run_flags = ["--bootstrap-servers", "--input-topic", "--output-topic", "--dlq-topic", "--group-id",
                 "--delivery", "--worker-slot", "--model", "--mode", "--max-new-tokens", "--device",
                 "--token-budget", "--max-wait-ms", "--windowed", "--window-key-field", "--port", "--log-level"]
    rn = sub.add_parser("run", parents=[_common()], help="run the worker: consume, summarize, produce (until SIGTERM)")
    rn.add_argument("--partitions", type=int, default=4,
                    help="partitions of the input topic when the embedded broker is used (default 4)")
    _add_setting_flags(rn, run_flags)

    dm = sub.add_parser("demo", parents=[_common()],
                        help="the whole pipeline on the embedded broker with synthetic telemetry")
    dm.add_argument("--documents", type=int, default=None,
                    help="documents to produce (default 200; 8 with a real model on a CPU, every third a long log)")
    dm.add_argument("--timeout", type=float, default=600, help="give up after this many seconds (default 600)")
    dm.add_argument("--show-model-text", action="store_true",
                    help="also print the model's text when the model is the tiny random one (noise, labelled so)")
    _add_setting_flags(dm, ["--model", "--mode", "--compaction", "--max-new-tokens", "--device", "--token-budget",
                            "--log-level"])

    at = sub.add_parser("autotune", parents=[_common()],
                        help="Phase 0: measure the largest safe token budget for this model and GPU, and cache it")
    at.add_argument("--refresh", action="store_true", help="measure again even if a cached budget exists")
    _add_setting_flags(at, ["--model", "--max-new-tokens", "--device"])

    # The broker has no settings of its own: no --config/--set (they would be ignored).
    br = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (Tansu) in the foreground")
    br.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    br.add_argument("--broker-port", type=port_number, default=9092, help="listen port 1-65535 (default 9092)")
    br.add_argument("--topics", default="", type=topic_specs, help="topics to create, NAME[:PARTITIONS],... ")

    cli_ops.add_parsers(sub, _common(), _add_setting_flags, run_parser=rn)
    return p


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65_535:
        raise argparse.ArgumentTypeError(f"not a port number (1-65535): {text!r}")
    return port


def topic_specs(spec: str) -> dict[str, int]:
    """NAME[:PARTITIONS],... -> {name: partitions}."""
    topics: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.partition(":")
        if n and not (n.isdigit() and int(n) >= 1):
            raise argparse.ArgumentTypeError(f"partitions of {name!r} must be an integer >= 1, got {n!r}")
        topics[topic_name(name)] = int(n) if n else 1
    return topics


def cmd_produce(args: argparse.Namespace) -> int:
    from worker.cli import preflight, produce  # noqa: PLC0415 confluent_kafka off --help

    try:
        split = produce.Split.parse(args.split)
    except produce.SplitError as exc:
        fail(str(exc))
    key_parts = _line_key(args)
    line_key = None if key_parts is None else produce.LineKey(*key_parts)
    if not args.file.is_file():
        fail(f"no such file: {args.file}")
    settings = load(args)
    bootstrap = settings.kafka.bootstrap_servers
    if not bootstrap:
        fail("produce needs a broker: set --bootstrap-servers (env RIBBON_KAFKA__BOOTSTRAP_SERVERS)")
    clients = client_config(settings.kafka)
    preflight.probe_cluster(clients.producer, args.timeout)  # exit 3 with one line, not hundreds of librdkafka retries
    conf = clients.tool_producer(**{k: v for k, v in settings.kafka.producer_extra.items() if k != "transactional.id"})
    try:
        n = produce.produce_file(args.file, topic=args.topic, producer_conf=conf, split=split, source=args.source,
                         progress=not args.no_progress, line_key=line_key, rate=args.rate)
    except RuntimeError as exc:
        fail(str(exc), EXIT_FAILED)
    print(f"produced {n} documents to {args.topic}")
    return 0


def _line_key(args: argparse.Namespace) -> tuple[str | None, str | None, str | None] | None:
    """The (key, key field, key regex) of --lines' LineKey (None without --lines); a bad combination
    exits 2 with one line."""
    keyed = [f for f in ("key", "key_field", "key_regex") if getattr(args, f) is not None]
    if not args.lines:
        if keyed:
            fail(f"--{keyed[0].replace('_', '-')} needs --lines")
        return None
    if args.rate is not None and args.rate <= 0:
        fail(f"--rate must be > 0, got {args.rate}")
    if args.key_regex is not None:
        try:
            re.compile(args.key_regex)
        except re.error as exc:
            fail(f"--key-regex is not a regular expression: {exc}")
    return args.key, args.key_field, args.key_regex


def cmd_broker(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedBroker(host=args.host, port=args.broker_port) as broker:
        if args.topics:
            broker.create_topics(args.topics)
        print(f"broker ready on {broker.bootstrap} (in memory; Ctrl-C stops it)", flush=True)
        stop.wait()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    settings = load(args)
    if args.gpus:
        return run_supervisor(settings, args)
    # The pipeline (numpy, prometheus, OpenTelemetry: ~0.5 s) stays off `ribbon --help` and `run --gpus`'s supervisor.
    from worker.cli import preflight  # noqa: PLC0415 confluent_kafka off --help
    from worker.cli.start import build_worker, log_identity, warn_if_unreachable  # noqa: PLC0415 pipeline off --help
    from worker.pipeline.app import install_signal_handlers  # noqa: PLC0415 pipeline off --help

    if settings.model.mode != "digest":
        preflight.refuse_random_model(settings.model.path)
    setup_logging(settings.log_level, settings.log_format)
    if settings.model.mode != "digest":
        if settings.kafka.bootstrap_servers:  # the cheap checks first: a bad client property needs no model
            preflight.check_client_config(*kafka_client_config(settings.kafka))
        preflight.check_model_path(settings.model.path, settings.model.local_files_only, settings.model)
    stop = install_signal_handlers()  # before the model loads: a SIGTERM then still exits 0
    try:
        bootstrap = settings.kafka.bootstrap_servers
        if bootstrap:
            log_identity(settings)
            warn_if_unreachable(settings)
            worker = build_worker(settings, bootstrap, stop)
            return 0 if stop.is_set() else worker.run_until_signalled(stop)
        k = settings.kafka
        with EmbeddedBroker() as broker:
            broker.create_topics({**{t: args.partitions for t in k.input_topics}, k.output_topic: 1, k.dlq_topic: 1})
            print(f"no bootstrap servers configured: embedded broker on {broker.bootstrap}", file=sys.stderr)
            worker = build_worker(embedded_settings(settings, broker.bootstrap), broker.bootstrap, stop)
            return 0 if stop.is_set() else worker.run_until_signalled(stop)
    except SettingsError as exc:
        fail(str(exc))


def cmd_demo(args: argparse.Namespace) -> int:
    from worker.cli import preflight  # noqa: PLC0415 confluent_kafka off --help
    from worker.demo.run import run_demo  # noqa: PLC0415 only `ribbon demo` loads the demo

    settings = load(args)
    if settings.model.mode != "digest":
        preflight.check_model_path(settings.model.path, settings.model.local_files_only, settings.model)
    setup_logging("WARNING" if settings.log_level == "INFO" else settings.log_level, "text")
    return run_demo(settings, args.documents, args.timeout, progress=sys.stderr.isatty(),
                    show_model_text=args.show_model_text)


def cmd_autotune(args: argparse.Namespace) -> int:
    from worker.cli import preflight  # noqa: PLC0415 confluent_kafka off --help
    from worker.engine import autotune_budget, load_engine  # noqa: PLC0415 torch (~1.5 s) off --help
    from worker.pipeline.app import cache_root, resolve_model_path  # noqa: PLC0415 pipeline off --help

    settings = load(args)
    path = preflight.check_model_path(settings.model.path, settings.model.local_files_only, settings.model)
    setup_logging(settings.log_level, "text")
    cache = cache_root(settings.model)
    try:
        eng = load_engine(settings.model.model_copy(update={"path": resolve_model_path(path, cache)}))
    except EngineSettingError as exc:
        raise StartupError(exc.setting, exc.message, exc.allowed) from None
    override = settings.packer.token_budget if isinstance(settings.packer.token_budget, int) else None
    budget = autotune_budget(eng, settings.model.max_new_tokens, override=override, refresh=args.refresh,
                             cache_path=cache / "autotune.json")
    print(f"token budget {budget} for {eng.name} on {eng.device} (max_new_tokens {settings.model.max_new_tokens})")
    return 0


COMMANDS = {"autotune": cmd_autotune, "produce": cmd_produce, "broker": cmd_broker,
            "run": cmd_run, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    """Every start-up error is one line on stderr and a documented exit code (worker/config/errors.py)."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["bench"]:
        fail(BENCH_ELSEWHERE, EXIT_USAGE)
    args = build_parser().parse_args(given)
    args.argv = given  # `run --gpus` hands the flags to its children
    command = COMMANDS.get(args.command) or cli_ops.COMMANDS[args.command]
    try:
        return command(args)
    except (SettingsError, BrokerError) as exc:
        fail(str(exc), EXIT_USAGE)
    except StartupError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
