"""The pixels benchmark's steer part: the final actor and the periodic evaluations' pick are both measured,
each under its own name (the part once measured robosteer-eval's default, which=best, as "final")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dsrl_steering
import pixels

UNSEEN = {"latest": 0.55, "best": 0.61}  # what robosteer-eval scores for each checkpoint


def test_steer_rows_evaluate_the_final_and_the_picked_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path, cwd: Path) -> None:
        calls.append(args)
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        if args[0] == "robosteer.scripts.steer":
            metrics = {"task": "push-v3", "base_success_rate": None, "initial_success_rate": 0.54}
            metrics |= {
                "success_rate": 0.5,
                "env_steps": 20001,
                "best_success_rate": 0.7,
                "best_env_steps": 10002,
            }
            metrics |= {"steerability": {"ratio": 0.87}, "wall_time_s": 900.0}
        else:
            which = next(a for a in args if a.startswith("which="))[6:]
            metrics = {"success_rate": UNSEEN[which]}
        (out / "metrics.json").write_text(json.dumps(metrics))

    monkeypatch.setattr(pixels, "run_module", fake_run)  # the steering run
    monkeypatch.setattr(dsrl_steering, "_run", lambda args, log: fake_run(args, log, Path()))  # evaluations
    monkeypatch.setattr(pixels, "demos_action_noise", lambda base: 0.3)
    args = argparse.Namespace(
        base="runs/pixels/base",
        seeds=[1],
        env_steps=20000,
        steer_minutes=40.0,
        eval_every=5000,
        steer_overrides=["dsrl.latent_bound=1.5"],
        episodes=100,
        note=None,
    )
    for _ in range(2):  # the second call finds every run and evaluation and runs nothing
        (row,) = pixels.steer_rows(args, tmp_path)
    assert [c[0] for c in calls] == ["robosteer.scripts.steer"] + ["robosteer.scripts.evaluate"] * 2
    assert "dsrl.latent_bound=1.5" in calls[0] and "run.eval_every=5000" in calls[0]
    assert {a for c in calls[1:] for a in c if a.startswith("which=")} == {"which=latest", "which=best"}
    assert row["final_eval_success_rate"] == UNSEEN["latest"]
    assert row["best_eval_success_rate"] == UNSEEN["best"] and row["best_env_steps"] == 10002
    assert row["overrides"] == ["dsrl.latent_bound=1.5"] and row["env_steps_budget"] == 20000
