"""Generated files: schemas/*.json validate real messages, agree with the decoder, and never drift."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from worker.config.load import env_var_for, iter_fields
from worker.messages.models import BadMessage, OutputMessage, decode_input, encode_output
from worker.kafka.headers import dead_letter_headers
from worker.cli.schemas import REGENERATE, build_schemas, generated_files, main
from worker.config.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]

PROPERTY = settings(deadline=None)  # no per-example deadline: CI machines are shared


@functools.lru_cache(maxsize=None)
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((ROOT / "schemas" / name).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.mark.parametrize("path", sorted(generated_files(ROOT)), ids=lambda p: str(p.relative_to(ROOT)))
def test_checked_in_file_matches_the_models(path: Path) -> None:
    expected = generated_files(ROOT)[path]
    current = path.read_text(encoding="utf-8") if path.exists() else None
    assert current == expected, f"{path.relative_to(ROOT)} is stale: run `{REGENERATE}` and commit the result"


def test_check_mode_detects_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "--root", str(tmp_path)]) == 1  # nothing written yet
    assert main(["--root", str(tmp_path)]) == 0
    assert main(["--check", "--root", str(tmp_path)]) == 0
    (tmp_path / "schemas" / "output.json").write_text("{}\n", encoding="utf-8")
    assert main(["--check", "--root", str(tmp_path)]) == 1
    assert "output.json" in capsys.readouterr().err


def test_every_schema_is_a_valid_json_schema() -> None:
    assert set(build_schemas()) == {"input.json", "output.json", "dead_letter.json"}
    for name in build_schemas():
        _validator(name)


VALID_INPUTS: list[dict[str, Any]] = [
    {"text": "link down"},
    {"lines": ["a", " "]},
    {"text": None, "lines": ["a"]},
    {"text": "t", "id": "x", "source": "gnb-017/oam", "kind": "pm", "attributes": {"a": 1}, "future": True},
]
INVALID_INPUTS: list[dict[str, Any]] = [
    {}, {"text": None}, {"text": ""}, {"text": " \n"}, {"lines": []}, {"lines": [" "]}, {"text": 5},
    {"lines": ["a", 1]}, {"text": "a", "lines": ["b"]}, {"text": "a", "id": ""}, {"text": "a", "attributes": []},
]


@pytest.mark.parametrize("obj", VALID_INPUTS)
def test_input_schema_accepts_what_the_decoder_accepts(obj: dict[str, Any]) -> None:
    _validator("input.json").validate(obj)
    decode_input(orjson.dumps(obj), max_bytes=1 << 20)


@pytest.mark.parametrize("obj", INVALID_INPUTS)
def test_input_schema_rejects_what_the_decoder_rejects(obj: dict[str, Any]) -> None:
    assert not _validator("input.json").is_valid(obj)
    with pytest.raises(BadMessage):
        decode_input(orjson.dumps(obj), max_bytes=1 << 20)


_values = st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet=" a\n", max_size=3) | st.lists(
    st.none() | st.text(alphabet=" b\t", max_size=2) | st.integers(0, 1), max_size=3) | st.dictionaries(
    st.sampled_from(["k", "x"]), st.integers(0, 1), max_size=2)


@PROPERTY
@given(st.dictionaries(st.sampled_from(["text", "lines", "id", "source", "kind", "attributes", "other"]), _values))
def test_input_schema_and_decoder_agree(obj: dict[str, Any]) -> None:
    try:
        decode_input(orjson.dumps(obj), max_bytes=1 << 20)
        accepted = True
    except BadMessage:
        accepted = False
    assert _validator("input.json").is_valid(obj) == accepted


def test_output_schema_validates_encoded_outputs() -> None:
    from worker.digest.digest import build_digest
    from worker.digest.templates import analyze

    lines = ["2026-12-01T10:00:00Z a INFO ok seq=1", "2026-12-01T10:00:01Z a INFO ok seq=2",
             "2026-12-01T10:00:02Z a ERROR link down"]
    msg = OutputMessage.model_validate(dict(
        id="in:0:7", input={"topic": "in", "partition": 0, "offset": 7}, summary={"text": "s", "source": "digest", "reason": "digest_mode"}, mode="digest",
        model="m", tokens={"input": 3, "output": 0, "chunks": 1}, timing_ms={"queued": 0, "gpu": 1, "total": 2},
        digest=build_digest(analyze(lines)).digest,
    ))
    doc = orjson.loads(encode_output(msg))
    validator = _validator("output.json")
    validator.validate(doc)
    assert set(doc) == set(validator.schema["required"])  # every field is always written
    assert doc["schema_version"] == 5 and doc["digest"]["severity"] == {"ERROR": 1, "INFO": 2}
    for broken in ({**doc, "extra": 1}, {k: v for k, v in doc.items() if k != "summary"}, {**doc, "mode": "x"},
                   {**doc, "mode": "extractive"}, {k: v for k, v in doc.items() if k != "digest"},
                   {**doc, "digest": {**doc["digest"], "lines": -1}}):
        assert not validator.is_valid(broken)


def test_dead_letter_schema_describes_the_headers() -> None:
    err = BadMessage("invalid_json", "starts with '{' but is not valid JSON")
    headers = dead_letter_headers(err, topic="in", partition=1, offset=2, worker_version="0.1.0")
    validator = _validator("dead_letter.json")
    doc = {k: v.decode() for k, v in headers}
    validator.validate(doc)
    assert not validator.is_valid({**doc, "source.offset": "-1"})
    assert not validator.is_valid({k: v for k, v in doc.items() if k != "error.class"})


def test_config_file_and_docs_list_every_setting() -> None:
    toml_text = (ROOT / "config" / "ribbon.toml").read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for path, _ in iter_fields(Settings):
        dotted = ".".join(path)
        assert f"| `{dotted}` | `{env_var_for(dotted)}` |" in docs
        assert f"\n{path[-1]} = " in toml_text or f"\n# {path[-1]} = " in toml_text
    assert load_settings(ROOT / "config" / "ribbon.toml", environ={}) == Settings()
