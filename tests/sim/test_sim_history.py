"""Observation history below the chunk wrapper: windows advance every executed step."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer import sim


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
