"""`ribbon produce` through a real broker: every document arrives intact."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from helpers import consume_all

from worker.cli.produce import Split, SplitError, documents


def _ribbon(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", *args], capture_output=True, text=True, timeout=120)


def test_thousand_documents_arrive_intact(broker, new_topic, tmp_path):
    topic = new_topic("produce", partitions=3)
    docs = [{"id": f"doc-{i}", "source": f"gnb-{i % 17:03d}/oam", "kind": "log",
             "text": "\n".join(f"line {j} of doc {i} é✓" for j in range(i % 23 + 1))} for i in range(1000)]
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")

    res = _ribbon("produce", str(path), "--topic", topic, "--bootstrap-servers", broker.bootstrap, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "produced 1000 documents" in res.stdout

    got = consume_all(broker.bootstrap, topic, expected=1000)
    assert len(got) == 1000
    by_id = {orjson.loads(m.value())["id"]: orjson.loads(m.value()) for m in got}
    assert by_id == {d["id"]: d for d in docs}


def test_blank_and_line_splits(tmp_path):
    path = tmp_path / "syslog.txt"
    path.write_text("a1\na2\n\n\nb1\n\nc1\nc2\nc3\n")
    blank = [orjson.loads(v) for v in documents(path, Split.parse("blank"), source="amf-2/syslog")]
    assert blank == [{"text": "a1\na2", "source": "amf-2/syslog"}, {"text": "b1", "source": "amf-2/syslog"},
                     {"text": "c1\nc2\nc3", "source": "amf-2/syslog"}]
    by2 = [orjson.loads(v)["text"] for v in documents(path, Split.parse("lines:2"))]
    assert by2 == ["a1\na2", "\n", "b1\n", "c1\nc2", "c3"]


@pytest.mark.parametrize("spec", ["lines:0", "lines:x", "words", ""])
def test_bad_split_is_refused(spec):
    with pytest.raises(SplitError, match="--split"):
        Split.parse(spec)


def test_produce_without_broker_names_the_setting(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "x"}\n')
    res = _ribbon("produce", str(path), "--topic", "t")
    assert res.returncode == 2
    assert "RIBBON_KAFKA__BOOTSTRAP_SERVERS" in res.stderr
