"""robosteer.scripts.common helpers the benchmark grids share."""

from __future__ import annotations

import json
from pathlib import Path

from robosteer.scripts.common import log_beside, read_results, run_module


def test_log_beside_keeps_dotted_run_names_apart():
    """with_suffix would turn both into base_dp_noise0.log / cell_t0.log; each run keeps its own log."""
    assert log_beside(Path("runs/base_dp_noise0.3_3000")) == Path("runs/base_dp_noise0.3_3000.log")
    assert log_beside(Path("runs/base_dp_noise0.5_3000"), ".train.log") == Path(
        "runs/base_dp_noise0.5_3000.train.log"
    )
    assert log_beside(Path("evals/cell_t0.5")) != log_beside(Path("evals/cell_t0"))


def test_read_results_fills_key_fields_that_old_rows_lack(tmp_path: Path):
    """A grid re-keyed by a new field (dsrl_steering: `which`) still reads the rows written before it."""
    path = tmp_path / "results.jsonl"
    rows = [{"seed": 0, "success_rate": 0.5}, {"seed": 0, "which": "best", "success_rate": 0.9}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    done = read_results(path, ("seed", "which"), defaults={"which": "latest"})
    assert {k: r["success_rate"] for k, r in done.items()} == {(0, "latest"): 0.5, (0, "best"): 0.9}
    assert read_results(tmp_path / "missing.jsonl", ("seed",)) == {}


def test_run_module_writes_its_log_into_a_new_folder(tmp_path: Path) -> None:
    """A benchmark's per-checkpoint evaluations log under a folder of their own that nothing made before."""
    log = tmp_path / "dsrl_na_s0_eval_kept" / "000060003.log"
    run_module(["json.tool", "--help"], log, tmp_path)
    assert "usage" in log.read_text()
