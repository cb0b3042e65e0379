"""Observation history below the chunk wrapper: windows advance every executed step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from robosteer import sim
from robosteer.sim.history import ObsHistoryWrapper


def test_history_window_matches_step_by_step_observations():
    rng = np.random.default_rng(0)
    chunk = rng.uniform(-1, 1, size=(2, 4, 4)).astype(np.float32)  # (B, Ta, A)
    with (
        sim.make_env(
            "reach-v3", num_envs=2, seed=3, action_chunk=4, obs_history=2, terminate_on_success=False
        ) as env,
        sim.make_env("reach-v3", num_envs=2, seed=3, terminate_on_success=False) as plain,
    ):
        obs = env.reset(seed=3)
        ref = plain.reset(seed=3)
        assert obs["state"].shape == (2, 2, 39)
        assert env.single_observation_space["state"].shape == (2, 39)
        np.testing.assert_array_equal(obs["state"][:, 0], ref["state"])  # first obs repeated at reset
        np.testing.assert_array_equal(obs["state"][:, 1], ref["state"])
        seen = []
        for t in range(4):
            ref, *_ = plain.step(chunk[:, t])
            seen.append(ref["state"])
        obs, *_ = env.step(chunk)
        np.testing.assert_array_equal(obs["state"][:, 0], seen[2])  # oldest first
        np.testing.assert_array_equal(obs["state"][:, 1], seen[3])


def test_history_final_obs_on_truncation_keeps_the_window():
    with sim.make_env(
        "reach-v3",
        num_envs=1,
        seed=0,
        action_chunk=3,
        obs_history=3,
        max_episode_steps=5,
        terminate_on_success=False,
    ) as env:
        env.reset(seed=0)
        env.step(np.zeros((1, 3, 4), np.float32))
        obs, _, _, truncated, info = env.step(np.zeros((1, 3, 4), np.float32))  # steps 4..5, truncates at 5
        assert truncated[0] and info["steps_executed"][0] == 2
        final = info["final_obs"]["state"][0]  # (To, 39) of the finished episode
        assert final.shape == (3, 39) and not np.array_equal(final, obs["state"][0])
        np.testing.assert_array_equal(obs["state"][0, 0], obs["state"][0, 2])  # the new episode's padding


def test_bad_history_value():
    with pytest.raises(ValueError, match="obs_history"):
        sim.make_env("reach-v3", obs_history=0)


class _Counter(gym.Env):
    """Dict observations that count steps: ``a`` = [t], ``b`` = [[t, 10 t]]; step returns reward 0.5 t."""

    def __init__(self):
        self.observation_space = gym.spaces.Dict(
            {
                "a": gym.spaces.Box(-1.0, 5.0, (1,), np.float32),
                "b": gym.spaces.Box(np.array([[0.0, -3.0]]), np.array([[2.0, 3.0]]), dtype=np.float64),
            }
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.t = 0

    def _obs(self):
        return {"a": np.array([self.t], np.float32), "b": np.array([[self.t, 10.0 * self.t]])}

    def reset(self, **kwargs):
        self.t = kwargs["seed"]
        return self._obs(), {"reset_seed": kwargs["seed"]}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.5 * self.t, self.t == 4, False, {"t": self.t}


def test_history_windows_by_hand_with_a_fake_env():
    env = ObsHistoryWrapper(_Counter(), 3)
    space = env.observation_space
    assert space["a"].shape == (3, 1) and space["a"].low.tolist() == [[-1.0]] * 3
    assert space["b"].shape == (3, 1, 2) and space["b"].high.tolist() == [[[2.0, 3.0]]] * 3
    assert space["b"].dtype == np.float64
    obs, info = env.reset(seed=1)
    assert info == {"reset_seed": 1}
    assert obs["a"].tolist() == [[1.0]] * 3 and obs["b"].tolist() == [[[1.0, 10.0]]] * 3
    obs, reward, terminated, truncated, info = env.step(np.zeros(1, np.float32))
    assert obs["a"][:, 0].tolist() == [1.0, 1.0, 2.0]
    assert (reward, terminated, truncated, info) == (1.0, False, False, {"t": 2})
    env.step(np.zeros(1, np.float32))
    obs, reward, terminated, _, _ = env.step(np.zeros(1, np.float32))
    assert obs["a"][:, 0].tolist() == [2.0, 3.0, 4.0]  # oldest first, the window slides
    assert obs["b"][:, 0].tolist() == [[2.0, 20.0], [3.0, 30.0], [4.0, 40.0]]
    assert terminated and reward == 2.0
    obs, _ = env.reset(seed=0)  # a reset starts a fresh window
    assert obs["a"][:, 0].tolist() == [0.0, 0.0, 0.0]


def test_history_of_one_is_the_observation_with_a_step_axis():
    env = ObsHistoryWrapper(_Counter(), np.int64(1))
    assert env.n_obs_steps == 1 and env.observation_space["a"].shape == (1, 1)
    env.reset(seed=2)
    obs, *_ = env.step(np.zeros(1, np.float32))
    assert obs["a"].tolist() == [[3.0]]
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="obs_history"):
            ObsHistoryWrapper(_Counter(), bad)
