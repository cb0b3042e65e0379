"""experiments/dsrl_kept_average.py: uniform averages of a run's kept acting actors, scored on the unseen episodes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import dsrl_kept_average


def finished_run(out: Path, weights: dict[int, float]) -> Path:
    """A dsrl_steering.py run whose kept checkpoints {env_steps: w} act with a 1x1 linear actor of weight w."""
    run = out / "pick-place-v3" / "dsrl_na_s2"
    for step, w in weights.items():
        kept = run / "checkpoints" / "history" / f"{step:09d}"
        kept.mkdir(parents=True)
        (kept / "extra.json").write_text(json.dumps({"counters": {"env_steps": step}}))
        (kept / "weight").write_text(str(w))
    row = {"task": "pick-place-v3", "variant": "na", "seed": 2, "overrides": ["run.eval_every=5000"]}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    return run


def fake_policy(path: str) -> SimpleNamespace:
    actor = nn.Linear(1, 1)
    with torch.no_grad():
        actor.weight.fill_(float((Path(path) / "weight").read_text()))
        actor.bias.fill_(-float((Path(path) / "weight").read_text()))
    return SimpleNamespace(agent=SimpleNamespace(acting_actor=actor))


def test_each_average_takes_the_kept_actors_from_its_start_weight_by_weight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path, {10007: 1.0, 20002: 2.0, 30030: 6.0})
    scored: list[tuple[float, float, str]] = []

    def fake_evaluate(policy: SimpleNamespace, task: str, episodes: int, out: Path, which: str) -> float:
        actor = policy.agent.acting_actor
        scored.append((actor.weight.item(), actor.bias.item(), which))
        out.mkdir(parents=True)
        success = actor.weight.item() / 10
        (out / "metrics.json").write_text(json.dumps({"success_rate": success}))
        return success

    kept = [{"env_steps": 10007, "success_rate": 0.9}, {"env_steps": 30030, "success_rate": 0.7}]
    monkeypatch.setattr("robosteer.policies.steering.dsrl.load_steered_policy", fake_policy)
    monkeypatch.setattr(dsrl_kept_average, "evaluate_in_process", fake_evaluate)
    monkeypatch.setattr(dsrl_kept_average, "unseen_history", lambda run, task, episodes: kept)
    row = dsrl_kept_average.kept_averages(run, [0, 20000, 30030], 100)
    # by hand: (1 + 2 + 6) / 3 = 3; (2 + 6) / 2 = 4; 6 alone; the biases are their negatives
    assert scored == [
        (3.0, -3.0, "average of 3 kept actors"),
        (4.0, -4.0, "average of 2 kept actors"),
        (6.0, -6.0, "average of 1 kept actors"),
    ]
    assert row == {
        "task": "pick-place-v3",
        "variant": "na",
        "seed": 2,
        "overrides": ["run.eval_every=5000"],
        "episodes": 100,
        "kept": kept,
        "averages": [
            {"from": 0, "checkpoints": 3, "success_rate": 0.3},
            {"from": 20000, "checkpoints": 2, "success_rate": 0.4},
            {"from": 30030, "checkpoints": 1, "success_rate": 0.6},
        ],
    }
    assert dsrl_kept_average.kept_averages(run, [0, 20000, 30030], 100) == row
    assert len(scored) == 3  # the scores are reused from <run>_eval_avg/


def test_a_start_after_the_last_kept_checkpoint_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = finished_run(tmp_path, {10007: 1.0})
    monkeypatch.setattr(
        dsrl_kept_average, "unseen_history", lambda run, task, episodes: [{"env_steps": 10007}]
    )
    with pytest.raises(SystemExit, match=r"kept no checkpoint at or after 20000 env steps \(--starts\)"):
        dsrl_kept_average.kept_averages(run, [20000], 100)
