"""`make probes`: the committed probe table is not stale, and every probe in it is handled.

The probes themselves run in `make probes` (about two CPU-minutes), not here: this test enumerates the probes
the harness defines now (no probe runs) and checks that the committed rows are exactly those and the page is
what the rows give. It reads tracked files only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import probes


def _rows() -> list[dict]:
    return [json.loads(line) for line in probes.ROWS.read_text().splitlines() if line.strip()]


def test_the_committed_rows_are_the_probes_defined_now(tmp_path):
    defined = [(p.kind, p.name) for p in probes.all_probes(tmp_path)]
    committed = [(r["kind"], r["name"]) for r in _rows()]
    assert len(set(defined)) == len(defined), "two probes share a name"
    assert committed == defined, (
        "the probe set changed: run `make probes` and commit docs/probes.md + its rows"
    )


def test_the_page_is_what_the_rows_give_and_every_probe_is_handled():
    rows = _rows()
    meta = {k: rows[0][k] for k in ("commit", "machine", "command")}
    assert probes.TABLE.read_text() == probes.page(rows, meta), "docs/probes.md is stale: run `make probes`"
    assert len(rows) >= 200
    assert [r["name"] for r in rows if not r["handled"]] == []


def test_the_table_counts_and_lists_what_was_not_handled():
    rows = [
        {"kind": "a", "name": "x", "handled": True, "seen": ""},
        {"kind": "a", "name": "y", "handled": False, "seen": "Traceback"},
        {"kind": "b", "name": "z", "handled": True, "seen": ""},
    ]
    text = probes.table(rows)
    assert "| a | 2 | 1 |" in text and "| b | 1 | 1 |" in text and "| **all** | **3** | **2** |" in text
    assert "- a: y — Traceback" in text
