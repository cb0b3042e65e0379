"""scripts.common helpers the benchmark grids share."""

from __future__ import annotations

from pathlib import Path

from scripts.common import log_beside


def test_log_beside_keeps_dotted_run_names_apart():
    """with_suffix would turn both into base_dp_noise0.log / cell_t0.log; each run keeps its own log."""
    assert log_beside(Path("runs/base_dp_noise0.3_3000")) == Path("runs/base_dp_noise0.3_3000.log")
    assert log_beside(Path("runs/base_dp_noise0.5_3000"), ".train.log") == Path(
        "runs/base_dp_noise0.5_3000.train.log"
    )
    assert log_beside(Path("evals/cell_t0.5")) != log_beside(Path("evals/cell_t0"))
