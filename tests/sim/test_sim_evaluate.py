"""Scripted experts and the evaluation harness (exact episode counts, B-independence, videos)."""

from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest

from robosteer import sim

# Meta-World's scripted policies warn that their gains saturate; the env clips actions anyway.
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def test_push_expert_succeeds_and_evaluate_reports() -> None:
    with sim.make_env("push-v3", num_envs=2) as env:
        result = sim.evaluate(env, sim.ScriptedExpert("push-v3"), episodes=10, seed=0, progress=False)
    assert result["episodes"] == 10 and len(result["successes"]) == 10
    assert result["success_rate"] >= 0.9
    lo, hi = result["success_ci95"]
    assert 0.0 <= lo <= result["success_rate"] <= hi <= 1.0
    assert len(set(result["episode_seeds"])) == 10
    assert result["env_steps"] >= sum(result["lengths"])
    assert 0 < result["mean_episode_length"] < env.max_episode_steps
    assert result["policy_reset"] == "per_env" and result["env_steps_per_s"] > 0


def test_evaluate_is_independent_of_num_envs() -> None:
    results = []
    for num_envs in (1, 3):
        with sim.make_env("reach-v3", num_envs=num_envs) as env:
            results.append(
                sim.evaluate(env, sim.ScriptedExpert("reach-v3"), episodes=4, seed=9, progress=False)
            )
    one, three = results
    assert one["episode_seeds"] == three["episode_seeds"] == [sim.episode_seed(9, k) for k in range(4)]
    assert one["lengths"] == three["lengths"] and one["successes"] == three["successes"]
    assert three["env_steps"] > one["env_steps"]  # surplus episodes ran but were not counted


class _RecordingPolicy:
    """Zero actions; records which envs were reset."""

    def __init__(self) -> None:
        self.resets: list[list[int]] = []

    def reset(self, env_ids: list[int] | None = None) -> None:
        self.resets.append(list(env_ids) if env_ids is not None else [])

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros((len(obs["state"]), 4), np.float32)


def test_policy_reset_per_finished_env_and_failure_ci() -> None:
    policy = _RecordingPolicy()
    with sim.make_env("reach-v3", num_envs=2, max_episode_steps=3) as env:
        result = sim.evaluate(env, policy, episodes=3, seed=0, progress=False)
    assert policy.resets == [[0, 1], [0, 1], [0, 1]]  # initial reset, then both envs finish together twice
    assert result["success_rate"] == 0.0 and result["lengths"] == [3, 3, 3]
    assert result["success_ci95"][0] == 0.0 and result["success_ci95"][1] == pytest.approx(0.5615, abs=1e-3)


def test_wilson_interval_known_values() -> None:
    assert sim.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert sim.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert sim.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


def test_evaluate_writes_video_of_env0(tmp_path: Path) -> None:
    path = tmp_path / "videos" / "eval.mp4"
    with sim.make_env("reach-v3", num_envs=2) as env:
        result = sim.evaluate(
            env,
            sim.ScriptedExpert("reach-v3"),
            episodes=2,
            seed=1,
            video_path=path,
            video_episodes=1,
            video_size=64,
            progress=False,
        )
    assert result["videos"] == [str(path)]
    frames = imageio.mimread(path)
    assert len(frames) == result["lengths"][0] + 1  # initial frame + one per step, final state included
    assert frames[0].shape == (64, 64, 3)


def test_write_video_checks_frames(tmp_path: Path) -> None:
    out = sim.write_video(np.zeros((3, 15, 17, 3), np.uint8), tmp_path / "odd.mp4", fps=10)
    assert imageio.mimread(out)[0].shape == (16, 18, 3)
    with pytest.raises(ValueError, match="uint8"):
        sim.write_video(np.zeros((3, 16, 16, 3), np.float32), tmp_path / "bad.mp4")
    with pytest.raises(ValueError, match=r"\(T, H, W, 3\)"):
        sim.write_video(np.zeros((16, 16, 3), np.uint8), tmp_path / "bad.mp4")


def test_expert_rejects_image_only_obs() -> None:
    with pytest.raises(KeyError, match="obs\\['state'\\]"):
        sim.ScriptedExpert("reach-v3").act({"image/corner2": np.zeros((1, 8, 8, 3), np.uint8)})


def test_episode_max_is_each_episodes_largest_info_value_in_episode_order() -> None:
    """``episode_max`` keeps, per episode, the largest value a per-step info key took (by hand below: the
    same episodes stepped one env at a time), whatever the number of envs; an unknown key is named."""
    policy = _RecordingPolicy()  # zero actions: the object stays, the hand hovers
    keys = ("obj_to_target", "grasp_success")
    got = []
    for num_envs in (1, 2):
        with sim.make_env("pick-place-v3", num_envs=num_envs, max_episode_steps=3) as env:
            result = sim.evaluate(env, policy, episodes=3, seed=4, progress=False, episode_max=keys)
        got.append(result["episode_max"])
    assert got[0] == got[1]
    by_hand: dict[str, list[float]] = {k: [] for k in keys}
    with sim.make_env("pick-place-v3", num_envs=1, max_episode_steps=3) as env:
        for k in range(3):
            env.reset(seed=[sim.episode_seed(4, k)])
            steps = [env.step(np.zeros((1, 4), np.float32))[4] for _ in range(3)]
            for key in keys:
                by_hand[key].append(max(float(info[key][0]) for info in steps))
    assert got[0] == by_hand and by_hand["grasp_success"] == [0.0, 0.0, 0.0]
    assert len(set(by_hand["obj_to_target"])) == 3  # three initial states: a mix-up would show

    with sim.make_env("pick-place-v3", num_envs=1, max_episode_steps=3) as env:
        expert = sim.evaluate(env, sim.ScriptedExpert("pick-place-v3"), episodes=1, seed=0, progress=False)
        assert "episode_max" not in expert
        with pytest.raises(
            ValueError, match=r"'grasped' is not a per-step info key of pick-place-v3: \[.*'grasp_success'"
        ):
            sim.evaluate(env, policy, episodes=1, seed=0, progress=False, episode_max=("grasped",))
