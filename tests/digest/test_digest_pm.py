"""Issue 37 item 5: PM files that read right (prolog before the declaration, true counts, the span)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.digest.document import analyze_document
from worker.digest.render import render
from worker.digest.structured import _distinct, _median


def _measdata(prolog: str, counters: int, begin_attr: str = 'beginTime="2026-12-01T10:00:00Z"') -> str:
    types = "".join(f'<measType p="{p}">NF.Counter{p}</measType>' for p in range(1, counters + 1))
    values = "".join(f'<measValue measObjLdn="NRCellCU={i}">'
                     + "".join(f'<r p="{p}">{(p * 7 + i) % 50 + 1}</r>' for p in range(1, counters + 1))
                     + "</measValue>" for i in range(4))
    return (prolog + f'<measDataFile xmlns="urn:3gpp:28.532"><fileHeader><measData {begin_attr}/></fileHeader>'
            '<measData><measEntity localDn="ManagedElement=gnb-9"/><measInfo measInfoId="NR">'
            f'<granPeriod duration="PT900S" endTime="2026-12-01T10:15:00Z"/>{types}{values}</measInfo></measData>'
            '</measDataFile>')


def test_a_stylesheet_and_a_comment_before_the_declaration_still_read():
    prolog = ('<?xml-stylesheet type="text/xsl" href="MeasDataCollection.xsl"?>\n<!-- exported by the OSS -->\n'
              '<?xml version="1.0" encoding="UTF-8"?>\n')
    pm = analyze_document(_measdata(prolog, 3)).digest["pm"]
    assert pm is not None and pm["standard"] == "28.532" and pm["counters"] == 3


def test_the_nonzero_count_is_the_true_count_not_the_list_length():
    d = analyze_document(_measdata('<?xml version="1.0"?>\n', 61)).digest
    assert d["pm"]["nonzero_total"] == 61 and len(d["pm"]["nonzero"]) < 61
    assert "61 non-zero" in render(d)


def test_begin_and_end_time_are_the_span():
    d = analyze_document(_measdata('<?xml version="1.0"?>\n', 2)).digest
    assert (d["pm"]["begin"], d["pm"]["end"]) == ("2026-12-01T10:00:00Z", "2026-12-01T10:15:00Z")
    assert d["span"] is not None
    assert (d["span"]["first"], d["span"]["last"]) == ("2026-12-01T10:00:00Z", "2026-12-01T10:15:00Z")


def test_a_32435_collection_begin_time_is_the_begin():
    xml = ('<?xml version="1.0"?><measCollecFile xmlns="http://www.3gpp.org/ftp/specs/archive/32_series/32.435#measCollec">'
           '<fileHeader collectionBeginTime="2026-12-01T09:00:00+01:00"><fileSender localDn="OSS-1"/></fileHeader>'
           '<measData><managedElement localDn="ManagedElement=enb-3"/><measInfo><granPeriod duration="PT900S" '
           'endTime="2026-12-01T09:15:00+01:00"/><measTypes>A.B A.C</measTypes>'
           '<measValue measObjLdn="EUtranCellFDD=1"><measResults>3 0</measResults></measValue></measInfo></measData>'
           '<fileFooter><measCollec endTime="2026-12-01T09:15:00+01:00"/></fileFooter></measCollecFile>')
    d = analyze_document(xml).digest
    assert d["pm"]["begin"] == "2026-12-01T09:00:00+01:00" and d["pm"]["end"] == "2026-12-01T09:15:00+01:00"
    assert d["span"] is not None and d["pm"]["nonzero_total"] == 1


def test_a_process_digests_pm_files_and_logs_without_importing_numpy_ma():
    """numpy.ma costs 12-25 ms to import (np.unique and np.median import it on their first call): the pass
    of a fresh process (a PM file read in bulk, one parsed whole (an attribute before measObjLdn), a log)
    leaves it unimported."""
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys\n"
            "from tests.digest.test_digest_pm import _measdata\n"
            "from worker.digest.prepared import PrepareOptions, prepare\n"
            "o = PrepareOptions(highlights=3, compaction=True, min_saving=0.2, render=True)\n"
            "for text in (_measdata('<?xml version=\"1.0\"?>\\n', 7),\n"
            "             _measdata('<?xml version=\"1.0\"?>\\n', 7).replace('<measValue ', '<measValue x=\"1\" '),\n"
            "             '\\n'.join(f'2026-12-01T10:00:{i:02d}Z host ERROR link {i % 3} down' for i in range(40))):\n"
            "    assert prepare(text, 'x', 'pm', o).error is None\n"
            "print('numpy.ma' in sys.modules)\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "False", out.stderr


_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.0, 1.0, 2.5, -7.0]),
                    st.floats(min_value=1e307, max_value=1.7e308))


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(st.lists(_VALUES, min_size=1, max_size=40))
def test_the_median_is_numpys(values):
    xs = np.array(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):        # both overflow alike (two values near the maximum)
        want = float(np.median(xs))
        got = _median(xs)
    assert (got == want and np.signbit(got) == np.signbit(want)) or (np.isnan(got) and np.isnan(want)), values


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 60), max_size=50))
def test_the_distinct_ids_are_numpys_unique(ids):
    a = np.array(ids, dtype=np.int64)
    used, inv = _distinct(a)
    want_used, want_inv = np.unique(a, return_inverse=True)
    assert used.tolist() == want_used.tolist() and inv.tolist() == want_inv.tolist()
