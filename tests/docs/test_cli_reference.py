"""docs/cli.md and the algorithm pages' hyperparameter tables are what the commands' --help gives today
(tests/docs/cli_reference.py regenerates them; ``make docs`` writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "docs"))

import cli_reference as ref  # noqa: E402


def test_generated_pages_are_current() -> None:
    want = ref.pages()
    stale = [str(p.relative_to(ROOT)) for p, text in want.items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"stale: {stale}; run `python tests/docs/cli_reference.py --write`"
    assert {p.name for p in want} >= {"cli.md", "dsrl.md", "expo.md", "vgps.md"}


def test_cli_page_holds_every_command_and_a_field_comment() -> None:
    text = ref.cli_page()
    for command in {c for c, _, _ in ref.CASES}:
        assert f"## `{command}" in text
    assert "dsrl.gamma=0.95  ours (CPU)" in text  # a DSRLConfig field's default and its comment


def test_a_changed_field_comment_makes_its_table_stale(tmp_path: Path) -> None:
    page = ROOT / "docs" / "algorithms" / "dsrl.md"
    edited = page.read_text().replace("| `dsrl.gamma` | `0.95` |", "| `dsrl.gamma` | `0.99` |")
    assert edited != page.read_text()
    assert ref.redraw(edited) == page.read_text()  # the block is redrawn from the code, whatever it held


def test_hyperparameter_table_labels_reference_and_ours() -> None:
    table = ref.hyperparameters("steer", [], ("dsrl.",))
    rows = [r for r in table.splitlines()[2:]]
    assert len(rows) >= 15
    labels = {r.split("|")[3].strip() for r in rows}
    assert {"reference", "ours"} <= labels
