"""Settings: precedence, every kind of error, immutability, secrets, librdkafka mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pydantic
import pytest

from worker.config.settings import (
    Settings,
    SettingsError,
    cli_exit_on_error,
    env_var_for,
    load_settings,
)
from worker.kafka.config import kafka_client_config


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ribbon.toml"
    path.write_text(text, encoding="utf-8")
    return path


# (name, TOML text, env, overrides, getter, [default, toml, env, override] expected values)
PRECEDENCE: list[tuple[str, str, dict[str, str], dict[str, Any], Callable[[Settings], Any], list[Any]]] = [
    ("top-level scalar", 'log_level = "WARNING"\n', {"RIBBON_LOG_LEVEL": "error"}, {"log_level": "DEBUG"},
     lambda s: s.log_level, ["INFO", "WARNING", "ERROR", "DEBUG"]),
    ("nested scalar", '[kafka]\ngroup_id = "g-toml"\n', {"RIBBON_KAFKA__GROUP_ID": "g-env"},
     {"kafka.group_id": "g-cli"}, lambda s: s.kafka.group_id, ["ribbon", "g-toml", "g-env", "g-cli"]),
    ("nested float", "[batching]\nmax_wait_ms = 10.0\n", {"RIBBON_BATCHING__MAX_WAIT_MS": "20"},
     {"batching.max_wait_ms": 30}, lambda s: s.batching.max_wait_ms, [50.0, 10.0, 20.0, 30.0]),
    ("int or literal", "[batching]\ntoken_budget = 4096\n", {"RIBBON_BATCHING__TOKEN_BUDGET": "auto"},
     {"batching.token_budget": "8192"}, lambda s: s.batching.token_budget, ["auto", 4096, "auto", 8192]),
    ("list", '[kafka]\ninput_topics = ["t1"]\n', {"RIBBON_KAFKA__INPUT_TOPICS": "e1, e2"},
     {"kafka.input_topics": '["c1"]'}, lambda s: s.kafka.input_topics,
     [("ribbon.input",), ("t1",), ("e1", "e2"), ("c1",)]),
    ("dict merges key by key", '[kafka.consumer_extra]\n"fetch.min.bytes" = 1\n"client.id" = "toml"\n',
     {"RIBBON_KAFKA__CONSUMER_EXTRA": '{"client.id": "env", "check.crcs": true}'},
     {"kafka.consumer_extra.fetch.min.bytes": 7}, lambda s: s.kafka.consumer_extra,
     [{}, {"fetch.min.bytes": 1, "client.id": "toml"},
      {"fetch.min.bytes": 1, "client.id": "env", "check.crcs": True},
      {"fetch.min.bytes": 7, "client.id": "env", "check.crcs": True}]),
    ("whole group as JSON", '[server]\nport = 1000\nhost = "0.0.0.0"\n', {"RIBBON_SERVER": '{"port": 2000}'},
     {"server.port": "3000"}, lambda s: (s.server.host, s.server.port),
     [("127.0.0.1", 9464), ("0.0.0.0", 1000), ("0.0.0.0", 2000), ("0.0.0.0", 3000)]),
]


@pytest.mark.parametrize("case", PRECEDENCE, ids=[c[0] for c in PRECEDENCE])
def test_precedence_defaults_toml_env_overrides(tmp_path: Path, case: tuple) -> None:
    _, toml_text, env, overrides, get, expected = case
    empty, full = _toml(tmp_path, ""), tmp_path / "full.toml"
    full.write_text(toml_text, encoding="utf-8")
    assert get(load_settings(empty, environ={})) == expected[0]
    assert get(load_settings(full, environ={})) == expected[1]
    assert get(load_settings(full, environ=env)) == expected[2]
    assert get(load_settings(full, environ=env, overrides=overrides)) == expected[3]


def test_each_layer_applies_alone(tmp_path: Path) -> None:
    empty = _toml(tmp_path, "")
    assert load_settings(empty, environ={}, overrides={"kafka.group_id": "cli"}).kafka.group_id == "cli"
    assert load_settings(empty, environ={"RIBBON_KAFKA__GROUP_ID": "env"}).kafka.group_id == "env"


def test_groups_merge_field_by_field_across_sources(tmp_path: Path) -> None:
    path = _toml(tmp_path, '[kafka]\ngroup_id = "a"\ndlq_topic = "dead"\n')
    s = load_settings(path, environ={"RIBBON_KAFKA__OUTPUT_TOPIC": "out"}, overrides={"kafka.worker_slot": "4"})
    assert (s.kafka.group_id, s.kafka.dlq_topic, s.kafka.output_topic, s.kafka.worker_slot) == ("a", "dead", "out", 4)
    assert s.kafka.input_topics == ("ribbon.input",)


def test_none_override_means_flag_not_given(tmp_path: Path) -> None:
    s = load_settings(_toml(tmp_path, '[kafka]\ngroup_id = "a"\n'), environ={}, overrides={"kafka.group_id": None})
    assert s.kafka.group_id == "a"


def test_config_file_choice(tmp_path: Path) -> None:
    chosen = _toml(tmp_path, '[kafka]\ngroup_id = "from-env-path"\n')
    other = tmp_path / "other.toml"
    other.write_text('[kafka]\ngroup_id = "from-arg"\n', encoding="utf-8")
    assert load_settings(environ={"RIBBON_CONFIG": str(chosen)}).kafka.group_id == "from-env-path"
    assert load_settings(other, environ={"RIBBON_CONFIG": str(chosen)}).kafka.group_id == "from-arg"


def test_repo_defaults_file_equals_builtin_defaults() -> None:
    assert load_settings(environ={}) == Settings()


def test_reserved_variables_are_not_settings(tmp_path: Path) -> None:
    s = load_settings(_toml(tmp_path, ""), environ={"RIBBON_WERROR": "ON", "PATH": "/bin", "OTHER_X": "1"})
    assert s == Settings()


def test_blank_bootstrap_means_embedded_broker(tmp_path: Path) -> None:
    s = load_settings(_toml(tmp_path, ""), environ={"RIBBON_KAFKA__BOOTSTRAP_SERVERS": "  "})
    assert s.kafka.bootstrap_servers is None


# (id, TOML text, env, overrides, setting, env var, text the message must hold)
ERRORS = [
    ("bad type env", "", {"RIBBON_BATCHING__MAX_SEQS_PER_BIN": "many"}, {}, "batching.max_seqs_per_bin",
     "RIBBON_BATCHING__MAX_SEQS_PER_BIN", "integer"),
    ("bad type toml", '[server]\nport = "x"\n', {}, {}, "server.port", "RIBBON_SERVER__PORT", "config file"),
    ("fractional int", "[kafka]\nworker_slot = 1.5\n", {}, {}, "kafka.worker_slot", "RIBBON_KAFKA__WORKER_SLOT",
     ">= 0"),
    ("above range", "", {}, {"server.port": "70000"}, "server.port", "RIBBON_SERVER__PORT", "<= 65535"),
    ("below range", "", {"RIBBON_DRAIN_TIMEOUT_S": "-1"}, {}, "drain_timeout_s", "RIBBON_DRAIN_TIMEOUT_S", ">= 0"),
    ("literal env", "", {"RIBBON_KAFKA__DELIVERY": "twice"}, {}, "kafka.delivery", "RIBBON_KAFKA__DELIVERY",
     "'exactly_once' | 'at_least_once'"),
    ("literal toml", 'log_format = "xml"\n', {}, {}, "log_format", "RIBBON_LOG_FORMAT", "'json' | 'text'"),
    ("literal cli", "", {}, {"model.dtype": "int4"}, "model.dtype", "RIBBON_MODEL__DTYPE", "'bfloat16'"),
    ("budget too small", "", {}, {"batching.token_budget": "8"}, "batching.token_budget",
     "RIBBON_BATCHING__TOKEN_BUDGET", "'auto' | integer >= 16"),
    ("budget not a number", "", {"RIBBON_BATCHING__TOKEN_BUDGET": "lots"}, {}, "batching.token_budget",
     "RIBBON_BATCHING__TOKEN_BUDGET", "'auto'"),
    ("device", "", {}, {"engine.device": "gpu"}, "engine.device", "RIBBON_ENGINE__DEVICE", "cuda:N"),
    ("unknown toml key", '[kafka]\ngrup_id = "x"\n', {}, {}, "kafka.grup_id", "RIBBON_KAFKA__GRUP_ID",
     "did you mean kafka.group_id"),
    ("unknown toml table", "[kafak]\nx = 1\n", {}, {}, "kafak", "RIBBON_KAFAK", "unknown setting"),
    ("unknown env", "", {"RIBBON_BATCHING__MAX_WAIT": "1"}, {}, "batching.max_wait", "RIBBON_BATCHING__MAX_WAIT",
     "did you mean batching.max_wait_ms"),
    ("unknown top-level env", "", {"RIBBON_VERBOSE": "1"}, {}, "verbose", "RIBBON_VERBOSE", "unknown setting"),
    ("unknown override", "", {}, {"generation.temprature": "1"}, "generation.temprature", "RIBBON_GENERATION__TEMPRATURE",
     "did you mean generation.temperature"),
    ("key below a leaf", "", {}, {"kafka.group_id.x": "1"}, "kafka.group_id.x", "RIBBON_KAFKA__GROUP_ID__X",
     "no sub-settings"),
    ("group given a scalar", "kafka = 3\n", {}, {}, "kafka", "RIBBON_KAFKA", "expected a table"),
    ("bad JSON dict env", "", {"RIBBON_KAFKA__CONSUMER_EXTRA": "{nope"}, {}, "kafka.consumer_extra",
     "RIBBON_KAFKA__CONSUMER_EXTRA", "invalid JSON"),
    ("bad JSON list env", "", {"RIBBON_KAFKA__INPUT_TOPICS": '["a"'}, {}, "kafka.input_topics",
     "RIBBON_KAFKA__INPUT_TOPICS", "comma-separated"),
    ("dict value type", '[kafka.producer_extra]\n"x.y" = [1]\n', {}, {}, "kafka.producer_extra.x.y",
     "RIBBON_KAFKA__PRODUCER_EXTRA", "librdkafka"),
    ("empty list", "[kafka]\ninput_topics = []\n", {}, {}, "kafka.input_topics", "RIBBON_KAFKA__INPUT_TOPICS",
     "topic names"),
    ("bad topic name", "", {"RIBBON_KAFKA__OUTPUT_TOPIC": "a topic"}, {}, "kafka.output_topic",
     "RIBBON_KAFKA__OUTPUT_TOPIC", "not a valid Kafka topic name"),
    ("feedback loop", "", {}, {"kafka.output_topic": "ribbon.input"}, "kafka.output_topic",
     "RIBBON_KAFKA__OUTPUT_TOPIC", "also an input topic"),
    ("sasl without mechanism", "", {"RIBBON_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"}, {}, "kafka.sasl_mechanism",
     "RIBBON_KAFKA__SASL_MECHANISM", "required"),
    ("bad toml syntax", "[kafka\n", {}, {}, "config", "RIBBON_CONFIG", "cannot read"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_each_kind_of_error_is_one_line_naming_setting_and_env_var(tmp_path: Path, case: tuple) -> None:
    _, toml_text, env, overrides, setting, env_var, needle = case
    with pytest.raises(SettingsError) as info:
        load_settings(_toml(tmp_path, toml_text), environ=env, overrides=overrides)
    err = info.value
    line = str(err)
    assert (err.setting, err.env_var) == (setting, env_var), line
    assert "\n" not in line and setting in line and env_var in line and needle in line, line
    assert err.message and err.message in line


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(tmp_path / "nope.toml", environ={})
    assert info.value.setting == "config" and "not found" in str(info.value) and "nope.toml" in str(info.value)


@pytest.mark.parametrize("toml_text, env, overrides, source", [
    ("[server]\nport = -1\n", {}, {}, "config file"),
    ("[server]\nport = 1\n", {"RIBBON_SERVER__PORT": "-1"}, {}, "environment"),
    ("[server]\nport = 1\n", {"RIBBON_SERVER__PORT": "2"}, {"server.port": -1}, "command line"),
])
def test_error_says_where_the_value_came_from(tmp_path: Path, toml_text: str, env: dict, overrides: dict,
                                              source: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(_toml(tmp_path, toml_text), environ=env, overrides=overrides)
    assert info.value.source.startswith(source) and "got -1" in str(info.value).replace("'", "")


def test_settings_are_frozen(tmp_path: Path) -> None:
    s = load_settings(_toml(tmp_path, ""), environ={})
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        s.kafka.group_id = "other"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        s.log_level = "DEBUG"  # type: ignore[misc]


SECRET = "hunter2-Zq9"


def test_secret_is_never_printed(tmp_path: Path) -> None:
    env = {"RIBBON_KAFKA__SECURITY_PROTOCOL": "SASL_SSL", "RIBBON_KAFKA__SASL_MECHANISM": "PLAIN",
           "RIBBON_KAFKA__SASL_USERNAME": "u", "RIBBON_KAFKA__SASL_PASSWORD": SECRET}
    s = load_settings(_toml(tmp_path, ""), environ=env)
    for text in (repr(s), str(s), repr(s.kafka), s.model_dump_json(), str(s.model_dump())):
        assert SECRET not in text
    consumer, producer = kafka_client_config(s.kafka, bootstrap="h:1")
    assert consumer["sasl.password"] == producer["sasl.password"] == SECRET
    assert consumer["sasl.mechanism"] == "PLAIN" and consumer["security.protocol"] == "SASL_SSL"
    bad = _toml(tmp_path, "[kafka]\nsasl_password = 987654321\n")
    with pytest.raises(SettingsError) as info:
        load_settings(bad, environ={})
    assert info.value.setting == "kafka.sasl_password" and "987654321" not in str(info.value)


@pytest.mark.parametrize("path, var", [
    ("kafka.bootstrap_servers", "RIBBON_KAFKA__BOOTSTRAP_SERVERS"), ("log_level", "RIBBON_LOG_LEVEL"),
    ("batching.token_budget", "RIBBON_BATCHING__TOKEN_BUDGET"),
    ("kafka.consumer_extra.fetch.min.bytes", "RIBBON_KAFKA__CONSUMER_EXTRA"),
])
def test_env_var_for(path: str, var: str) -> None:
    assert env_var_for(path) == var


def _kafka(tmp_path: Path, **values: Any) -> Any:
    return load_settings(_toml(tmp_path, ""), environ={}, overrides={f"kafka.{k}": v for k, v in values.items()}).kafka


def test_client_config_exactly_once(tmp_path: Path) -> None:
    k = _kafka(tmp_path, bootstrap_servers="b:9092", group_id="g", worker_slot=3, consumer_extra='{'
               '"group.instance.id": "w3", "session.timeout.ms": 10000, "max.poll.interval.ms": 60000}')
    consumer, producer = kafka_client_config(k)
    assert consumer["bootstrap.servers"] == producer["bootstrap.servers"] == "b:9092"
    assert {key: consumer[key] for key in (
        "group.id", "group.instance.id", "enable.auto.commit", "auto.offset.reset",
        "partition.assignment.strategy", "isolation.level", "session.timeout.ms", "max.poll.interval.ms",
    )} == {"group.id": "g", "group.instance.id": "w3", "enable.auto.commit": False, "auto.offset.reset": "earliest",
           "partition.assignment.strategy": "cooperative-sticky", "isolation.level": "read_committed",
           "session.timeout.ms": 10_000, "max.poll.interval.ms": 60_000}
    assert producer["transactional.id"] == "ribbon-g-3" and producer["enable.idempotence"] is True
    assert producer["compression.type"] == "zstd" and consumer["fetch.wait.max.ms"] == 500
    assert producer["message.max.bytes"] > k.max_message_bytes  # room for a dead letter's headers
    assert "sasl.password" not in producer


def test_supervised_children_are_separate_static_members(tmp_path: Path, monkeypatch) -> None:
    k = _kafka(tmp_path, bootstrap_servers="b:9092", group_id="g", worker_slot=3,
               consumer_extra='{"group.instance.id": "w3"}')
    monkeypatch.setenv("RIBBON_GPU_INDEX", "1")  # set by `ribbon run --gpus` for its second child
    consumer, producer = kafka_client_config(k)
    assert consumer["group.instance.id"] == "w3-gpu1" and producer["transactional.id"].endswith("-3-gpu1")


def test_client_config_at_least_once_and_extras_override(tmp_path: Path) -> None:
    k = _kafka(tmp_path, delivery="at_least_once",
               consumer_extra='{"auto.offset.reset": "latest", "fetch.min.bytes": 10}',
               producer_extra='{"linger.ms": 20, "enable.idempotence": false}')
    consumer, producer = kafka_client_config(k, bootstrap="127.0.0.1:1")
    assert "transactional.id" not in producer and "isolation.level" not in consumer
    assert consumer["bootstrap.servers"] == "127.0.0.1:1"
    assert (consumer["auto.offset.reset"], consumer["fetch.min.bytes"]) == ("latest", 10)
    assert (producer["linger.ms"], producer["enable.idempotence"]) == (20, False)
    assert "group.instance.id" not in consumer


def test_client_config_bootstrap_argument_and_missing(tmp_path: Path) -> None:
    k = _kafka(tmp_path, bootstrap_servers="configured:9092")
    assert kafka_client_config(k, bootstrap="embedded:1")[0]["bootstrap.servers"] == "embedded:1"
    with pytest.raises(SettingsError) as info:
        kafka_client_config(_kafka(tmp_path))
    assert info.value.env_var == "RIBBON_KAFKA__BOOTSTRAP_SERVERS"


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
def test_librdkafka_accepts_every_property(tmp_path: Path, delivery: str) -> None:
    from confluent_kafka import Consumer, Producer

    consumer_cfg, producer_cfg = kafka_client_config(_kafka(tmp_path, delivery=delivery), bootstrap="127.0.0.1:1")
    Consumer(consumer_cfg).close()  # construction validates names and values; nothing connects
    Producer(producer_cfg).flush(0)


def test_cli_exit_on_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    @cli_exit_on_error
    def main() -> int:
        load_settings(_toml(tmp_path, ""), environ={"RIBBON_SERVER__PORT": "http"})
        return 0

    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ribbon: error: setting server.port (RIBBON_SERVER__PORT") and err.count("\n") == 1
