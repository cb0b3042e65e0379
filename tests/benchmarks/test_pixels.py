"""The pixels benchmark's steer part: the final actor and the periodic evaluations' pick are both measured,
each under its own name (the part once measured robosteer-eval's default, which=best, as "final")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pixels
import steering_runs

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

    trained: list[Path] = []

    def fake_trained(run: Path, task: str, episodes: int, out: Path) -> float:
        if not (out / "metrics.json").exists():  # evaluated once per run, as the real one caches its figure
            trained.append(out)
            out.mkdir(parents=True)
            (out / "metrics.json").write_text(json.dumps({"success_rate": 0.6}))
        return 0.6

    monkeypatch.setattr(pixels, "evaluate_trained", fake_trained)  # the final trained (not averaged) actor
    monkeypatch.setattr(pixels, "run_module", fake_run)  # the steering run
    monkeypatch.setattr(
        steering_runs, "run_logged", lambda args, log: fake_run(args, log, Path())
    )  # evaluations
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
    assert row["trained_eval_success_rate"] == 0.6 and trained == [tmp_path / "dsrl_s1_eval_trained"]

    # a larger budget extends the finished run from its last checkpoint and evaluates its actors anew
    calls.clear()
    (longer,) = pixels.steer_rows(argparse.Namespace(**{**vars(args), "env_steps": 30000}), tmp_path)
    assert [c[0] for c in calls] == ["robosteer.scripts.steer", evaluate, evaluate]
    assert "resume=true" in calls[0] and "env_steps=30000" in calls[0]
    assert longer["env_steps"] == 30001 and longer["env_steps_budget"] == 30000
    assert longer["wall_time_s"] == 1800.0  # both sessions' wall time (each fake session reports 900 s)
    assert len(trained) == 2  # the extended run's trained actor evaluated anew


def test_read_out_scores_by_hand() -> None:
    truth = np.array([[0.0], [2.0], [4.0]])  # variance 8/3
    pred = np.array([[1.0], [2.0], [3.0]])  # squared errors 1, 0, 1: mean 2/3
    r2, rmse = pixels._fit_scores(pred, truth)
    assert r2[0] == pytest.approx(1 - (2 / 3) / (8 / 3))
    assert rmse[0] == pytest.approx(np.sqrt(2 / 3))


def test_probe_reads_every_target_out_of_every_input_on_held_out_episodes(pixel_base_run) -> None:
    import h5py
    from results_tables import Row, pixels_probe

    work, base = pixel_base_run  # a tiny To=2 diffusion run on 2 push-v3 demos at 32 px (tests/conftest.py)
    args = argparse.Namespace(base=str(base), steer_overrides=[], threads=1, probe_steps=5)
    rows = pixels.probe_rows(args)
    with h5py.File(work / "demos" / "demos.hdf5", "r") as f:
        lengths = [len(f["data"][k]["obs"]["state"]) for k in sorted(f["data"].keys())]
    readouts = [
        "proprio, ridge",
        "base embedding, ridge",
        "base embedding, MLP",
        "base encoder trained on the labels",
    ]
    assert [(r["readout"], r["target"]) for r in rows] == [
        (ro, t) for ro in readouts for t in pixels.PROBE_TARGETS
    ]
    for r in rows:  # episode 0 of the two is held out (every fifth), the other fits the read-outs
        assert (r["windows"], r["test_windows"]) == (sum(lengths), lengths[0])
        assert np.isfinite([r["rmse_cm"], r["spread_cm"]]).all() and r["rmse_cm"] >= 0
        # one held-out episode holds one goal: its R² is undefined, not a number; the pushed object moves
        assert (r["r2"] is None) == r["target"].startswith("goal"), r
        assert r["r2"] is None or np.isfinite(r["r2"])
        assert r["which"] == "ema" and r["task"] == "push-v3"
    page = pixels_probe([Row(part="probe", commit="c", machine="m", load=1.0, **r) for r in rows])
    lines = [ln for ln in page.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| target | spread, cm | " + " | ".join(readouts) + " |"
    goal_y = {r["readout"]: r for r in rows if r["target"] == "goal y"}
    want = [f"– ({goal_y[ro]['rmse_cm']:.1f} cm)" for ro in readouts]
    assert lines[-1] == f"| goal y | {goal_y[readouts[0]]['spread_cm']:.1f} | " + " | ".join(want) + " |"


def test_goal_thirds_split_an_evaluation_by_the_goal_each_seed_draws(tmp_path: Path) -> None:
    from robosteer.sim.metaworld_env import MetaWorldEnv

    seeds = list(range(300, 330))
    env = MetaWorldEnv("push-v3")
    goal_y = np.array([env.reset(seed=s)[0]["state"][37] for s in seeds])  # Meta-World v3: goal at 36:39
    low = goal_y <= np.sort(goal_y)[9]  # the ten lowest goals along y succeed, no other
    metrics = {"task": "push-v3", "which": "latest", "steered": True, "episode_seeds": seeds}
    metrics["successes"] = low.tolist()
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    (row,) = pixels.goal_thirds_rows([tmp_path])
    assert row["thirds"] == [1.0, 0.0, 0.0] and row["thirds_episodes"] == [10, 10, 10]
    assert row["success_rate"] == pytest.approx(1 / 3) and row["episodes"] == 30
    assert row["goal_y_cm"] == pytest.approx([100 * goal_y.min(), 100 * goal_y.max()])
