"""scripts.report: the end-of-demo table and plot, including the Wilson-bound rounding case."""

from __future__ import annotations

import json

from scripts.report import main


def test_report_writes_table_and_plot(tmp_path, capsys):
    runs = {
        "demos": {
            "task": "push-v3",
            "success_rate": 0.98,
            "attempts": 100,
            "episodes": 98,
            "wall_time_s": 1.0,
        },
        # A Wilson upper bound a rounding error below the rate itself (it crashed matplotlib's error bars).
        "dp_eval": {
            "task": "push-v3",
            "success_rate": 1.0,
            "success_ci95": [0.963, 0.9999999999999999],
            "episodes": 100,
            "policy": "checkpoint",
            "wall_time_s": 2.0,
        },
        "train": {"task": "push-v3", "final_loss": 0.01},  # no success rate: no row
    }
    for name, metrics in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "collection: expert success over all attempts" in out and "[0.93, 0.99]" in out  # CI computed
    assert "trained policy on unseen initial states" in out and "train |" not in out
    assert (tmp_path / "summary.png").stat().st_size > 10_000 and (tmp_path / "summary.md").exists()


def test_report_without_runs_is_an_error(tmp_path):
    assert main([str(tmp_path)]) == 1
