"""experiments/dsrl_kept.py: a run's kept checkpoints scored with their mean latent and sampling, one row per run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import dsrl_kept
import steering_runs


def finished_run(out: Path, scores: dict[int, tuple[float, float]]) -> Path:
    """A dsrl_steering.py run with kept checkpoints {env_steps: (mean-latent, sampled) success} and its row."""
    run = out / "pick-place-v3" / "dsrl_na_s2"
    for step, (mean, sampled) in scores.items():
        kept = run / "checkpoints" / "history" / f"{step:09d}"
        kept.mkdir(parents=True)
        (kept / "extra.json").write_text(json.dumps({"counters": {"env_steps": step}}))
        (kept / "scores").write_text(json.dumps({"true": mean, "false": sampled}))
    row = {"task": "pick-place-v3", "variant": "na", "seed": 2, "overrides": ["run.eval_every=5000"]}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    return run


def test_each_kept_checkpoint_is_scored_both_ways_on_the_same_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path, {50019: (0.94, 0.72), 80031: (0.64, 0.66)})
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path) -> None:
        calls.append(args)
        ck = Path(next(a for a in args if a.startswith("checkpoint="))[11:])
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        mode = "false" if "deterministic=false" in args else "true"
        out.mkdir(parents=True, exist_ok=True)
        success = json.loads((ck / "scores").read_text())[mode]
        (out / "metrics.json").write_text(json.dumps({"success_rate": success}))

    monkeypatch.setattr(steering_runs, "run_logged", fake_run)
    row = dsrl_kept.kept_both_ways(run, 100, states=0)  # the critic's view: its own test below
    assert row == {
        "task": "pick-place-v3",
        "variant": "na",
        "seed": 2,
        "overrides": ["run.eval_every=5000"],
        "episodes": 100,
        "states": 0,
        "kept": [
            {"env_steps": 50019, "mean_latent": 0.94, "sampled": 0.72},
            {"env_steps": 80031, "mean_latent": 0.64, "sampled": 0.66},
        ],
    }
    assert len(calls) == 4 and sum("deterministic=false" in c for c in calls) == 2
    assert all(f"seed={steering_runs.EVAL_SEED}" in c and "which=latest" in c for c in calls)
    assert (
        dsrl_kept.kept_both_ways(run, 100, states=0) == row and len(calls) == 4
    )  # the evaluations are reused


def test_a_run_without_its_benchmark_row_or_kept_checkpoints_is_a_clear_error(tmp_path: Path) -> None:
    run = finished_run(tmp_path, {})
    with pytest.raises(SystemExit, match=r"kept no checkpoints .*--unseen-every"):
        dsrl_kept.kept_both_ways(run, 100)
    (tmp_path / "results.jsonl").unlink()
    with pytest.raises(SystemExit, match=r"results\.jsonl: the run's benchmark row"):
        dsrl_kept.kept_both_ways(run, 100)
    with pytest.raises(SystemExit, match=r"not a run of dsrl_steering\.py"):
        dsrl_kept.kept_both_ways(tmp_path / "pick-place-v3" / "base_dp", 100)


class FakeCritic:
    """Two heads: a chunk's sum times ``shift`` and that + 1 (min picks the first)."""

    def __init__(self, shift: float) -> None:
        self.shift = shift

    def __call__(self, c: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        q = chunk.sum(1) * self.shift  # each critic weighs chunks by its own shift: the last one judges
        return torch.stack([q, q + 1])  # (E, S)

    @staticmethod
    def reduce(q: torch.Tensor, how: str) -> torch.Tensor:
        assert how == "min"
        return q.min(0).values


class FakeAgent:
    """A kept checkpoint's agent: its mean latent is ``shift`` everywhere, decoding adds the state's first
    feature, and its critic is :class:`FakeCritic` with the same shift."""

    obs_keys = ("state",)

    def __init__(self, shift: float) -> None:
        self.shift, self.critic = shift, FakeCritic(shift)

    def features(self, obs: dict) -> torch.Tensor:
        return obs["state"].flatten(1)

    def critic_features(self, obs: dict) -> torch.Tensor:
        return obs["state"].flatten(1)

    def acting_actor(self, s: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, None]:
        assert deterministic  # the critic rates the mean latent, what evaluation acts with
        return torch.full((s.shape[0], 2), self.shift), None

    def decode(self, obs: dict, latent: torch.Tensor) -> torch.Tensor:
        return latent.unsqueeze(1) + obs["state"][:, :1, :1]  # (S, 1, 2)


def test_the_last_kept_critic_rates_every_kept_mean_latent_on_the_same_replay_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path, {10007: (0.8, 0.7), 20002: (0.9, 0.7), 30030: (0.7, 0.7)})
    shifts = {"000010007": 1.0, "000020002": 2.0, "000030030": 3.0}
    states = torch.arange(5.0).reshape(5, 1, 1).expand(5, 2, 3)  # (N, To, D): first feature 0..4
    loaded: list[str] = []

    def fake_policy(path: str) -> SimpleNamespace:
        loaded.append(Path(path).name)
        return SimpleNamespace(agent=FakeAgent(shifts[Path(path).name]))

    def fake_checkpoint(path: Path, names: list[str]) -> SimpleNamespace:
        assert Path(path).name == "000030030" and names == ["buffer"]  # the last kept checkpoint's replay
        return SimpleNamespace(modules={"buffer": {"size": torch.tensor(5), "data/obs/state": states}})

    monkeypatch.setattr("robosteer.policies.steering.dsrl.load_steered_policy", fake_policy)
    monkeypatch.setattr("robosteer.policies.checkpoint.load_checkpoint", fake_checkpoint)
    got = dsrl_kept.critic_view(run, states=5)
    # actor k's chunk at state x: (k + x, k + x); the judge (shift 3) scores it 3 · 2 (k + x); mean x = 2
    assert got == [3 * 2 * (k + 2) for k in (1.0, 2.0, 3.0)]
    assert loaded == ["000030030", "000010007", "000020002"]  # the judge loaded once, acting for itself too
    assert dsrl_kept.critic_view(run, states=3) == dsrl_kept.critic_view(run, states=3)  # a seeded sample
