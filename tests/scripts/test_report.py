"""robosteer.scripts.report: the end-of-demo table and plot, including the Wilson-bound rounding case."""

from __future__ import annotations

import json

from robosteer.scripts.report import main


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


def test_report_steering_rows_curve_and_before_after_subset(tmp_path, capsys):
    runs = {
        "weak_eval": {"task": "push-v3", "success_rate": 0.4, "episodes": 100, "policy": "checkpoint"},
        "dsrl": {
            "task": "push-v3",
            "variant": "na",
            "success_rate": 0.7,
            "eval_episodes": 20,
            "env_steps": 20000,
            "history": [{"env_steps": 0.0, "success_rate": 0.3}, {"env_steps": 20000.0, "success_rate": 0.7}],
        },
        "dsrl_eval": {
            "task": "push-v3",
            "success_rate": 0.8,
            "episodes": 100,
            "policy": "checkpoint",
            "steered": True,
        },
    }
    for name, metrics in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "DSRL-na: last periodic eval of steering (20000 env steps)" in out
    assert "steered policy (frozen base + DSRL actor)" in out
    assert main([str(tmp_path), "weak_eval", "dsrl_eval"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")][1:]
    assert [ln.split("|")[1].strip() for ln in lines] == ["weak_eval", "dsrl_eval"]
    assert main([str(tmp_path), "weak_eval", "missing"]) == 1
