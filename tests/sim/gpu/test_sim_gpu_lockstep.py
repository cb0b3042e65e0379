"""MuJoCo Warp envs behind the shared lockstep protocol (sim.lockstep): action chunks, obs history, and
``sim.evaluate`` running on them unchanged (as tests/sim/test_sim_isaac.py does on the Isaac fakes).

Runs under ``make gpu-test`` (``.venv-gpu``, warp's CPU device without a GPU); skipped in the main environment.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mujoco_warp")
import numpy as np
import torch

from robosteer.sim import evaluate
from robosteer.sim.gpu import WarpReachEnv
from robosteer.sim.lockstep import TorchBatchedEnv
from robosteer.sim.metaworld_env import episode_seed

torch.set_num_threads(1)


class ReachPlanPolicy:
    """Open-loop plan toward the goal from the newest obs ({"state": (B, 39)} or (B, To, 39)); gripper open."""

    def __init__(self, gain: float = 25.0) -> None:
        self.gain = gain

    def _latest(self, obs: dict[str, Any]) -> torch.Tensor:
        state = torch.as_tensor(obs["state"])
        return state[:, -1] if state.dim() == 3 else state  # (B, 39)

    def act(self, obs: dict[str, Any]) -> torch.Tensor:
        state = self._latest(obs)
        action = torch.zeros(state.shape[0], 4)
        action[:, :3] = ((state[:, 36:39] - state[:, :3]) * self.gain).clamp(-1, 1)
        return action  # (B, 4)

    def act_chunk(self, obs: dict[str, Any], horizon: int = 8) -> torch.Tensor:
        """(B, Ta, 4): the hand is predicted to move 0.01 m per unit action (Meta-World's action scale)."""
        state = self._latest(obs).clone()
        steps = []
        for _ in range(horizon):
            steps.append(self.act({"state": state}))
            state[:, :3] += steps[-1][:, :3] * 0.01
        return torch.stack(steps, dim=1)


class ConstantPolicy:
    def act_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        return np.zeros((len(obs["state"]), 8, 4), np.float32)  # (B, Ta, 4)


def test_chunk_equals_single_steps_and_lockstep_end() -> None:
    chunked = WarpReachEnv(num_worlds=3, seed=0, action_chunk=8, obs_history=2, max_episode_steps=200)
    single = WarpReachEnv(num_worlds=3, seed=0, max_episode_steps=200)
    assert isinstance(chunked, TorchBatchedEnv)
    assert chunked.single_action_space.shape == (8, 4)
    assert chunked.single_observation_space["state"].shape == (2, 39)
    obs = chunked.reset(seed=1)["state"]  # (B, 2, 39)
    obs1 = single.reset(seed=1)["state"]  # (B, 39)
    assert obs.shape == (3, 2, 39) and torch.equal(obs[:, 0], obs[:, 1]) and torch.equal(obs[:, 1], obs1)
    with pytest.raises(ValueError, match=r"expected \(3, 8, 4\)"):
        chunked.step(torch.zeros(3, 4))

    # Before any episode ends, one chunk of 8 is exactly 8 single steps.
    policy = ReachPlanPolicy()
    chunk = policy.act_chunk({"state": obs})  # (B, 8, 4)
    out, reward, terminated, truncated, info = chunked.step(chunk)
    total = torch.zeros(3)
    for t in range(8):
        out1, r1, *_ = single.step(chunk[:, t])
        total += r1
    assert not terminated.any() and not truncated.any()
    assert info["steps_executed"].tolist() == [8, 8, 8] and info["step_success"].shape == (3, 8)
    assert torch.allclose(out["state"][:, -1], out1["state"], atol=1e-6)
    assert torch.allclose(reward, total, atol=1e-4)
    assert (info["episode_length"] == 8).all()
    assert "in_place_reward" in info  # Meta-World's reward terms pass through

    # World 0 reaches its goal inside a chunk; worlds 1 and 2 idle (zeros) and run every step.
    seeds0 = chunked.episode_seeds.clone()
    obs = out["state"]
    for _ in range(10):
        chunk = policy.act_chunk({"state": obs})
        chunk[1:] = 0.0
        out, reward, terminated, truncated, info = chunked.step(chunk)
        if terminated[0]:
            break
        obs = out["state"]
    assert terminated.tolist() == [True, False, False] and info["success"].tolist() == [True, False, False]
    n = int(info["steps_executed"][0])
    assert info["step_success"][0].tolist() == [False] * (n - 1) + [True] + [False] * (8 - n)
    assert info["steps_executed"][1:].tolist() == [8, 8]
    assert int(info["episode_length"][0]) > 8 and chunked._steps[0] == 8 - n  # idle steps: new episode
    assert info["_final_info"].tolist() == [True, False, False]
    assert info["final_info"]["episode_seed"][0] == seeds0[0]  # the finished episode's seed
    assert info["episode_seed"][0] == chunked.episode_seeds[0] != seeds0[0]
    assert torch.equal(out["state"][0, -1, 36:], chunked.goal[0])  # the new episode's goal
    assert not torch.equal(info["final_obs"]["state"][0, -1, 36:], chunked.goal[0])


def test_evaluate_runs_unchanged_on_warp_reach() -> None:
    env = WarpReachEnv(num_worlds=4, action_chunk=8, obs_history=2, max_episode_steps=80)
    out = evaluate(env, ReachPlanPolicy(), episodes=6, seed=0, progress=False)
    assert out["episodes"] == 6 and len(out["lengths"]) == 6 and out["success_rate"] == 1.0
    assert out["episode_seeds"] == [episode_seed(0, k) for k in range(6)]  # per-world seeds, queued ones
    assert all(1 <= n <= 80 for n in out["lengths"])
    # Episode k starts from episode_seed(0, k) whatever num_worlds is. First episodes match exactly with 3
    # worlds; later ones may not: a world's next episode begins with the idle rest of the ending chunk.
    three = evaluate(
        WarpReachEnv(num_worlds=3, action_chunk=8, obs_history=2, max_episode_steps=80, output="numpy"),
        ReachPlanPolicy(),
        episodes=6,
        seed=0,
        progress=False,
    )
    assert three["episode_seeds"] == out["episode_seeds"] and three["lengths"][:3] == out["lengths"][:3]
    assert three["returns"][:3] == pytest.approx(out["returns"][:3], abs=1e-4)
    assert three["success_rate"] == 1.0
    still = evaluate(
        WarpReachEnv(num_worlds=2, action_chunk=8, obs_history=2, max_episode_steps=16),
        ConstantPolicy(),
        episodes=3,
        seed=1,
        progress=False,
    )
    assert still["success_rate"] == 0.0 and still["lengths"] == [16, 16, 16]
    assert still["env_steps"] == 2 * 2 * 16  # two rounds of both worlds
