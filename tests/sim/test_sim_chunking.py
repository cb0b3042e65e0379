"""Action chunks: (B, Ta, A) steps that stop inside the chunk at termination or truncation."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer import sim

# Meta-World's scripted policies warn that their gains saturate; the env clips actions anyway.
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def test_chunk_stops_at_truncation_per_env() -> None:
    with sim.make_env("reach-v3", num_envs=2, action_chunk=4, max_episode_steps=6) as env:
        assert env.single_action_space.shape == (4, 4)
        env.reset(seed=0)
        chunk = np.zeros((2, 4, 4), np.float32)  # (B, Ta, A)
        _, _, terminated, truncated, info = env.step(chunk)
        assert info["steps_executed"].tolist() == [4, 4] and not truncated.any()
        assert info["step_success"].shape == (2, 4)
        _, _, terminated, truncated, info = env.step(chunk)
        assert info["steps_executed"].tolist() == [2, 2]  # steps 5 and 6, then the episode is over
        assert truncated.all() and not terminated.any()
        assert info["episode_length"].tolist() == [6, 6]
        _, _, _, _, info = env.step(chunk)
        assert info["episode_length"].tolist() == [4, 4]  # the auto-reset episode started fresh


def test_chunk_stops_at_success_with_summed_reward() -> None:
    expert = sim.ScriptedExpert("reach-v3")
    actions, rewards = [], []
    with sim.make_env("reach-v3") as env:  # record the expert's episode step by step
        obs = env.reset(seed=[42])
        while True:
            actions.append(expert.act(obs)[0])
            obs, reward, terminated, truncated, info = env.step(actions[-1][None])
            rewards.append(float(reward[0]))
            if terminated[0] or truncated[0]:
                break
    assert terminated[0]
    length, ta = len(actions), 8
    padded = np.concatenate([np.stack(actions), np.zeros((ta, 4), np.float32)])  # (T + Ta, A)
    with sim.make_env("reach-v3", action_chunk=ta) as env:
        env.reset(seed=[42])
        for k in range(0, length, ta):
            _, reward, terminated, truncated, info = env.step(padded[None, k : k + ta])
            executed = int(info["steps_executed"][0])
            np.testing.assert_allclose(reward[0], sum(rewards[k : k + executed]), rtol=1e-6)
            if terminated[0]:
                break
        assert k + executed == length and executed == length - (length - 1) // ta * ta
        assert info["success"][0] and info["step_success"][0, executed - 1]
        assert not info["step_success"][0, executed:].any()
        assert info["episode_length"][0] == length
