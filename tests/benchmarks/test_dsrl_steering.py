"""The steering benchmarks' base: one collect + train per (task, demos, noise, steps), named so runs share it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dsrl_steering
import steering_runs


@pytest.mark.parametrize(
    ("demos", "data_dir", "base_dir"),
    [
        (100, "demos_noise0.3", "base_dp_noise0.3_8000"),  # the original names: earlier runs keep their bases
        (20, "demos_20demos_noise0.3", "base_dp_20demos_noise0.3_8000"),
    ],
)
def test_weak_base_collects_the_asked_demos_once_under_its_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demos: int, data_dir: str, base_dir: str
) -> None:
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path) -> None:  # the collect/train/evaluate commands' outputs
        calls.append(args)
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        (out / "demos.hdf5").touch()
        (out / "metrics.json").write_text(json.dumps({"success_rate": 0.5}))

    monkeypatch.setattr(steering_runs, "run_logged", fake_run)
    for _ in range(2):  # the second call finds everything and runs nothing
        base, data, success = steering_runs.weak_base("push-v3", tmp_path, 0.3, 8000, 10, demos)
    assert (base, data, success) == (
        tmp_path / "push-v3" / base_dir,
        tmp_path / "push-v3" / data_dir / "demos.hdf5",
        0.5,
    )
    assert [c[0] for c in calls] == [
        "robosteer.scripts.collect",
        "robosteer.scripts.train",
        "robosteer.scripts.evaluate",
    ]
    assert f"episodes={demos}" in calls[0]


def test_unseen_history_evaluates_every_kept_checkpoint_once_in_step_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "dsrl_na_s0"
    for step, success in ((40023, 0.8), (30015, 0.91)):
        kept = run / "checkpoints" / "history" / f"{step:09d}"
        kept.mkdir(parents=True)
        (kept / "extra.json").write_text(json.dumps({"counters": {"env_steps": step}}))
        (kept / "success").write_text(str(success))  # what this fake checkpoint scores
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path) -> None:
        calls.append(args)
        ck = Path(next(a for a in args if a.startswith("checkpoint="))[11:])
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps({"success_rate": float((ck / "success").read_text())}))

    monkeypatch.setattr(steering_runs, "run_logged", fake_run)
    for _ in range(2):  # a second call (a run extended later) reuses the kept checkpoints' evaluations
        got = steering_runs.unseen_history(run, "pick-place-v3", 100)
    assert got == [{"env_steps": 30015, "success_rate": 0.91}, {"env_steps": 40023, "success_rate": 0.8}]
    assert len(calls) == 2
    assert all(
        "which=latest" in c and "episodes=100" in c and f"seed={steering_runs.EVAL_SEED}" in c for c in calls
    )
    assert steering_runs.unseen_history(tmp_path / "no_history", "pick-place-v3", 100) == []


def test_an_auto_base_is_trained_under_its_own_name_and_its_rows_carry_its_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--augment auto: the base is trained with action_noise_std=auto into a directory of its own, and the rows
    carry the σ it chose with each probe (from its metrics.json); a base without a choice adds nothing."""
    calls: list[list[str]] = []
    choice = {"chosen": 0.2, "probes": [{"sigma": 0.0, "ratio": 0.1}, {"sigma": 0.2, "ratio": 0.6}]}

    def fake_run(args: list[str], log: Path) -> None:
        calls.append(args)
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        (out / "demos.hdf5").touch()
        extra = {"auto_noise": choice} if args[0].endswith("train") else {}
        (out / "metrics.json").write_text(json.dumps({"success_rate": 0.4, **extra}))

    monkeypatch.setattr(steering_runs, "run_logged", fake_run)
    base, _, success = steering_runs.weak_base("hammer-v3", tmp_path, 0.0, 3000, 10, 10, "auto")
    assert base == tmp_path / "hammer-v3" / "base_dp_10demos_noise0.0_3000_augauto" and success == 0.4
    assert "action_noise_std=auto" in calls[1]
    assert dsrl_steering.auto_choice(base) == {"auto_noise": choice}
    assert dsrl_steering.auto_choice(base.parent / "demos_10demos_noise0.0") == {}  # metrics, no choice
    assert dsrl_steering.auto_choice(tmp_path / "missing") == {}


@pytest.mark.parametrize("value", [True, False])
def test_a_row_says_which_observations_its_actor_and_critics_read(tmp_path: Path, value: bool) -> None:
    """The default changed (raw until 1a03da3, normalised since): the row carries the run's resolved value."""
    (tmp_path / "config.yaml").write_text(f"dsrl:\n  normalize_obs: {str(value).lower()}\n  tau: 0.01\n")
    assert dsrl_steering._observations(tmp_path) == {"normalize_obs": value}
    (tmp_path / "config.yaml").write_text("sac:\n  tau: 0.01\n")  # a run whose config has no such field
    assert dsrl_steering._observations(tmp_path) == {}


def test_the_noise_check_plays_repeated_noise_through_the_action_queue() -> None:
    """--noise-check compares i.i.d. latents with one Da-vector repeated over the horizon: the chunks the
    acting policy plays must come from the planner's noise (an earlier version set an attribute nothing read,
    so both modes played i.i.d. noise)."""
    import torch

    from robosteer.policies.acting import ChunkPolicy

    class Echo:  # a base whose chunk is its noise: (B, Tp, Da) = (B, 4, 2)
        noise_shape = (4, 2)
        config = type("C", (), {"n_obs_steps": 1, "n_action_steps": 4})()
        device, shape_meta = torch.device("cpu"), {}

        def sample(self, obs: dict, noise: torch.Tensor) -> torch.Tensor:
            return noise

        def eval(self) -> None:
            pass

    obs = {"state": torch.zeros(3, 1, 5)}  # (B, To, D)
    for shared in (True, False):
        torch.manual_seed(0)
        chunk = dsrl_steering.NoisePlanner(Echo(), shared=shared).plan(obs, None)  # (3, 4, 2)
        assert chunk.shape == (3, 4, 2) and bool((chunk == chunk[:, :1]).all()) is shared
        acting = ChunkPolicy(dsrl_steering.NoisePlanner(Echo(), shared=shared), Echo())
        torch.manual_seed(0)
        played = torch.stack([torch.as_tensor(acting.act({"state": torch.zeros(3, 5)})) for _ in range(4)], 1)
        assert torch.equal(played, chunk)  # the queue plays the planner's chunk, row by row
