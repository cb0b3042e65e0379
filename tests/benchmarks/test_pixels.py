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

UNSEEN = {"latest": 0.55, "best": 0.61, "ema": 0.45}  # what robosteer-eval scores (ema: the base itself)


def test_steer_rows_evaluate_the_final_and_the_picked_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path, cwd: Path) -> None:
        calls.append(args)
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        if args[0] == "robosteer.scripts.steer":
            (out / "checkpoints" / "latest").mkdir(parents=True, exist_ok=True)
            budget = int(next(a for a in args if a.startswith("env_steps="))[10:])
            metrics = {"task": "push-v3", "base_success_rate": None, "initial_success_rate": 0.54}
            metrics |= {
                "success_rate": 0.5,
                "env_steps": budget + 1,
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
    monkeypatch.setattr(
        pixels, "find_checkpoint", lambda run, which: (Path(run) / "checkpoints" / which, None)
    )
    monkeypatch.setattr(pixels, "read_checkpoint_config", lambda path: {"task": "push-v3"})
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
    base_eval, row = pixels.steer_rows(args, tmp_path)
    (again,) = pixels.steer_rows(args, tmp_path)  # finds every run and evaluation and runs nothing
    assert again == row
    evaluate = "robosteer.scripts.evaluate"
    assert [c[0] for c in calls] == [evaluate, "robosteer.scripts.steer", evaluate, evaluate]
    # the base on the same unseen episodes as the steered actors, with the weights steering read (ema)
    assert "checkpoint=runs/pixels/base" in calls[0] and "which=ema" in calls[0] and "seed=200000" in calls[0]
    assert base_eval == {"part": "base_eval", "task": "push-v3", "base": "runs/pixels/base", "which": "ema",
                         "episodes": 100, "eval_seed": 200000, "success_rate": 0.45}  # fmt: skip
    assert "dsrl.latent_bound=1.5" in calls[1] and "run.eval_every=5000" in calls[1]
    assert "resume=true" not in calls[1] and all("seed=200000" in c for c in calls[2:])
    assert {a for c in calls[2:] for a in c if a.startswith("which=")} == {"which=latest", "which=best"}
    assert row["final_eval_success_rate"] == UNSEEN["latest"] and row["base_eval_success_rate"] == 0.45
    assert row["best_eval_success_rate"] == UNSEEN["best"] and row["best_env_steps"] == 10002
    assert row["overrides"] == ["dsrl.latent_bound=1.5"] and row["env_steps_budget"] == 20000

    # a larger budget extends the finished run from its last checkpoint and evaluates its actors anew
    calls.clear()
    (longer,) = pixels.steer_rows(argparse.Namespace(**{**vars(args), "env_steps": 30000}), tmp_path)
    assert [c[0] for c in calls] == ["robosteer.scripts.steer", evaluate, evaluate]
    assert "resume=true" in calls[0] and "env_steps=30000" in calls[0]
    assert longer["env_steps"] == 30001 and longer["env_steps_budget"] == 30000
    assert longer["wall_time_s"] == 1800.0  # both sessions' wall time (each fake session reports 900 s)
