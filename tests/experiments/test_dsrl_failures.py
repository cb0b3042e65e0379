"""experiments/dsrl_failures.py: a run's kept actors' failed episodes, split by whether the object was grasped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import dsrl_failures


def test_failures_split_by_whether_the_object_was_ever_grasped() -> None:
    successes = [True, False, False, True, False]
    grasped = [1.0, 0.0, 1.0, 0.0, 0.0]  # a success without the flag counts nowhere: only failures split
    reached = [1.0, 1.0, 1.0, 0.0, 0.0]  # of the two never grasped, the first reached the object
    want = {"failures": 3, "never_grasped": 2, "never_grasped_reached": 1, "grasped": 1}
    assert dsrl_failures.failures(successes, grasped, reached) == want


def test_reward_view_is_the_shaped_return_the_critics_learn_from() -> None:
    """Two episodes of Ta=8 chunks, scale 10: a 16-step success earning 80 (cost (80/10 - 16)/8 = -1) and a
    200-step failure earning 100 ((100/10 - 200)/8 = -23.75); mean -12.375, the success 16 steps long."""
    m = {"returns": [80.0, 100.0], "lengths": [16, 200], "successes": [True, False]}
    assert dsrl_failures.reward_view(m, 8, 10.0) == {"shaped_return": -12.375, "success_length": 16.0}
    none = {**m, "successes": [False, False]}
    assert dsrl_failures.reward_view(none, 8, 10.0)["success_length"] is None


def test_every_kept_actor_is_scored_once_with_its_grasp_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "pick-place-v3" / "dsrl_na_s2"
    episodes = {
        50019: ([True, True, False], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
        80031: ([True, False, False], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]),
    }
    for step in episodes:
        kept = run / "checkpoints" / "history" / f"{step:09d}"
        kept.mkdir(parents=True)
        (kept / "extra.json").write_text(json.dumps({"counters": {"env_steps": step}}))
    latest = run / "checkpoints" / "latest"
    latest.mkdir(parents=True)
    (latest / "config.json").write_text(json.dumps({"exec_slice": [1, 9]}))  # Ta = 8
    (run / "config.yaml").write_text("run:\n  reward_scale: 10.0\n")
    row = {"task": "pick-place-v3", "variant": "na", "seed": 2, "overrides": ["run.eval_every=5000"]}
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
    calls = []

    def fake_evaluate(policy: str, task: str, n: int, out: Path, which: str, episode_max: tuple) -> float:
        calls.append((Path(policy).name, task, n, which, episode_max))
        successes, grasped, reached = episodes[int(Path(policy).name)]
        out.mkdir(parents=True, exist_ok=True)
        maxima = {"grasp_success": grasped, "near_object": reached}
        m = {"success_rate": sum(successes) / 3, "successes": successes, "episode_max": maxima}
        m |= {"returns": [80.0, 80.0, 100.0], "lengths": [16, 32, 200], "episode_seeds": [11, 12, 13]}
        (out / "metrics.json").write_text(json.dumps(m))
        return m["success_rate"]

    monkeypatch.setattr("robosteer.policies.steering.dsrl.load_steered_policy", lambda path: path)
    monkeypatch.setattr(dsrl_failures, "evaluate_in_process", fake_evaluate)
    starts = []  # the episodes' object positions are looked up once per run: the third starts nearest

    def fake_starts(task: str, seeds: list[int]) -> np.ndarray:
        starts.append((task, seeds))
        return np.array([[0.0, 0.65, 0.02], [0.0, 0.68, 0.02], [0.0, 0.60, 0.02]])

    monkeypatch.setattr(dsrl_failures, "object_starts", fake_starts)
    got = dsrl_failures.kept_failures(run, 3)
    assert starts == [("pick-place-v3", [11, 12, 13])] and got["near_episodes"] == 1
    assert got["kept"] == [
        {
            "env_steps": 50019,
            "success_rate": 2 / 3,
            "failures": 1,
            "never_grasped": 0,
            "never_grasped_reached": 0,
            "grasped": 1,
            "shaped_return": -9.25,  # ((8 - 16) + (8 - 32) + (10 - 200)) / 8 / 3
            "success_length": 24.0,
            "near_success": 0.0,  # the third episode failed
            "rest_success": 1.0,
        },
        {
            "env_steps": 80031,
            "success_rate": 1 / 3,
            "failures": 2,
            "never_grasped": 1,
            "never_grasped_reached": 1,
            "grasped": 1,
            "shaped_return": -9.25,
            "success_length": 16.0,
            "near_success": 0.0,
            "rest_success": 0.5,
        },
    ]
    assert got["seed"] == 2 and got["overrides"] == ["run.eval_every=5000"] and got["episodes"] == 3
    assert calls == [
        ("000050019", "pick-place-v3", 3, "latest", ("grasp_success", "near_object")),
        ("000080031", "pick-place-v3", 3, "latest", ("grasp_success", "near_object")),
    ]
    assert dsrl_failures.kept_failures(run, 3) == got and len(calls) == 2  # the evaluations are reused
    stale = run.parent / "dsrl_na_s2_eval_failures" / "000050019" / "metrics.json"
    stale.write_text(json.dumps({"episode_max": {"grasp_success": [1.0]}}))  # scored before near_object
    assert dsrl_failures.kept_failures(run, 3) == got and len(calls) == 3  # that one alone is scored again


def test_object_starts_are_where_the_evaluated_episodes_start() -> None:
    """The object positions looked up by episode seed are those sim.evaluate's episodes (4 envs) start from."""
    from robosteer import sim

    class Recorder:
        """Zero actions; keeps every episode's first observation, in the order the envs start them."""

        def __init__(self) -> None:
            self.fresh, self.first = [True] * 4, {i: [] for i in range(4)}

        def reset(self, env_ids: list[int]) -> None:
            for i in env_ids:
                self.fresh[i] = True

        def act(self, obs: dict) -> np.ndarray:
            for i in range(4):
                if self.fresh[i]:
                    self.first[i].append(obs["state"][i, dsrl_failures.OBJECT].copy())
                    self.fresh[i] = False
            return np.zeros((4, 4))

    rec = Recorder()
    with sim.make_env("pick-place-v3", num_envs=4, max_episode_steps=20) as env:
        m = sim.evaluate(env, rec, episodes=8, seed=200000, progress=False)
    played = np.stack([rec.first[k % 4][k // 4] for k in range(8)])  # episode k ran in env k % 4
    looked_up = dsrl_failures.object_starts("pick-place-v3", m["episode_seeds"])
    np.testing.assert_allclose(looked_up, played)
    assert np.ptp(played[:, 1]) > 0.01  # the episodes differ: the lookup is not trivially constant


def test_by_place_splits_success_between_the_near_episodes_and_the_rest() -> None:
    near = np.array([True, False, False, True])
    assert dsrl_failures.by_place([True, True, False, False], near) == {
        "near_success": 0.5,
        "rest_success": 0.5,
    }
    assert dsrl_failures.by_place([False, True, True, False], near) == {
        "near_success": 0.0,
        "rest_success": 1.0,
    }
