"""docs/support-matrix.md is what scripts/support_matrix.py makes of the committed snapshot of
the main job's report, and that snapshot is of today's checker: its libraries and its cases.
When a library or a case is added, the page is stale until the main job runs again and the
script regenerates it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "support_matrix", REPO / "scripts" / "support_matrix.py")
assert _spec and _spec.loader
support_matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support_matrix)

SNAP = json.loads(support_matrix.SNAPSHOT.read_text(encoding="utf-8"))
STALE = "stale: run the main job with --json and python scripts/support_matrix.py REPORT.json"


def test_page_is_what_the_snapshot_gives():
    assert support_matrix.PAGE.read_text(encoding="utf-8") == support_matrix.page(SNAP), STALE


def test_snapshot_has_todays_cases():
    pytest.importorskip("numpy")
    from dlbridge_check.cases import CASES

    # every case ran (a case only some producers make has results only where they are)
    assert SNAP["cases"] == len(CASES), STALE
    assert set(SNAP["case_ids"]) <= {c.id for c in CASES}, STALE


def test_snapshot_has_todays_libraries():
    pytest.importorskip("numpy")
    from dlbridge_check.libraries import ALL_LIBRARIES

    absent = {entry.split()[0] for entry in SNAP["not_installed"]}
    assert set(SNAP["libraries"]) | absent == {cls.name for cls in ALL_LIBRARIES}, STALE


def test_snapshot_keeps_every_pair_and_its_bad_cases():
    # a small report of two results: the snapshot keeps the pair, its counts and the bad case
    report = {
        "dlbridge_version": "0", "interpreter": "CPython", "platform": "Linux", "cases": 2,
        "libraries": {"numpy": "2"}, "not_installed": [],
        "results": [
            {"producer": "numpy", "consumer": "numpy", "route": "direct", "case": "a/b",
             "status": "fail"},
            {"producer": "numpy", "consumer": "numpy", "route": "dlbridge", "case": "a/b",
             "status": "pass"},
        ],
        "summary": {"dlbridge_failures": 0,
                    "pairs": [{"producer": "numpy", "consumer": "numpy",
                               "direct": {"fail": 1}, "dlbridge": {"pass": 1}}]},
    }
    snap = support_matrix.snapshot(report)
    assert snap["pairs"][0]["direct_bad_cases"] == ["a/b"]
    assert snap["pairs"][0]["dlbridge_bad_cases"] == []
    text = support_matrix.page(snap)
    assert "| `numpy` | 0/1 |" in text and "| `numpy` | ✓ 1 |" in text
    assert "| [`a/b`](cases.md#case-a-b) | numpy → numpy | none |" in text
