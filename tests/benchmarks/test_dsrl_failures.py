"""benchmarks/dsrl_failures.py: a run's kept actors' failed episodes, split by whether the object was grasped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dsrl_failures


def test_failures_split_by_whether_the_object_was_ever_grasped() -> None:
    successes = [True, False, False, True, False]
    grasped = [1.0, 0.0, 1.0, 0.0, 0.0]  # a success without the flag counts nowhere: only failures split
    assert dsrl_failures.failures(successes, grasped) == {"failures": 3, "never_grasped": 2, "grasped": 1}


def test_every_kept_actor_is_scored_once_with_its_grasp_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "pick-place-v3" / "dsrl_na_s2"
    episodes = {50019: ([True, True, False], [1.0, 1.0, 1.0]), 80031: ([True, False, False], [1.0, 0.0, 1.0])}
    for step in episodes:
        kept = run / "checkpoints" / "history" / f"{step:09d}"
        kept.mkdir(parents=True)
        (kept / "extra.json").write_text(json.dumps({"counters": {"env_steps": step}}))
    row = {"task": "pick-place-v3", "variant": "na", "seed": 2, "overrides": ["run.eval_every=5000"]}
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    calls = []

    def fake_evaluate(policy: str, task: str, n: int, out: Path, which: str, episode_max: tuple) -> float:
        calls.append((Path(policy).name, task, n, which, episode_max))
        successes, grasped = episodes[int(Path(policy).name)]
        out.mkdir(parents=True)
        m = {
            "success_rate": sum(successes) / 3,
            "successes": successes,
            "episode_max": {"grasp_success": grasped},
        }
        (out / "metrics.json").write_text(json.dumps(m))
        return m["success_rate"]

    monkeypatch.setattr("robosteer.policies.steering.dsrl.load_steered_policy", lambda path: path)
    monkeypatch.setattr(dsrl_failures, "evaluate_in_process", fake_evaluate)
    got = dsrl_failures.kept_failures(run, 3)
    assert got["kept"] == [
        {"env_steps": 50019, "success_rate": 2 / 3, "failures": 1, "never_grasped": 0, "grasped": 1},
        {"env_steps": 80031, "success_rate": 1 / 3, "failures": 2, "never_grasped": 1, "grasped": 1},
    ]
    assert got["seed"] == 2 and got["overrides"] == ["run.eval_every=5000"] and got["episodes"] == 3
    assert calls == [
        ("000050019", "pick-place-v3", 3, "latest", ("grasp_success",)),
        ("000080031", "pick-place-v3", 3, "latest", ("grasp_success",)),
    ]
    assert dsrl_failures.kept_failures(run, 3) == got and len(calls) == 2  # the evaluations are reused
