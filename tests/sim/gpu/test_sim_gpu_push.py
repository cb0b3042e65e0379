"""MuJoCo Warp push-v3 (sim.gpu): reset distribution and reward bounds (parity: test_sim_gpu_parity.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco_warp")
import torch

from robosteer.sim.gpu import WarpPushEnv


def test_reset_distribution_and_reward_range() -> None:
    env = WarpPushEnv(num_worlds=128, seed=0)
    obs = env.reset(seed=5)["state"]  # (B, 39)
    puck, goal = env.obj_init_pos, env.goal
    assert torch.allclose(obs[:, 4:7], puck, atol=1e-5)  # the puck starts where it was placed
    assert (puck[:, 0].abs() <= 0.1).all() and ((puck[:, 1] >= 0.6) & (puck[:, 1] <= 0.7)).all()
    assert (goal[:, 0].abs() <= 0.1).all() and ((goal[:, 1] >= 0.8) & (goal[:, 1] <= 0.9)).all()
    assert torch.equal(goal[:, 2], puck[:, 2])  # Meta-World puts the goal at the puck's resting height
    assert ((puck[:, :2] - goal[:, :2]).norm(dim=-1) >= 0.15).all()
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        _, reward, _, _, info = env.step(torch.rand(128, 4, generator=gen) * 2 - 1)
        assert ((reward >= 0) & (reward <= 10)).all() and not info["success"].any()
        assert ((info["grasp_reward"] >= 0) & (info["grasp_reward"] <= 1)).all()


def test_a_noisy_hand_keeps_every_constraint_row() -> None:
    """The expert's hand with N(0, 0.5) noise presses the gripper into puck and table: more constraint rows
    than Warp allocates by default (64), all of them within the env's allocation, so none is dropped."""
    import numpy as np

    from robosteer.sim import ScriptedExpert

    env = WarpPushEnv(num_worlds=16, seed=0, output="numpy")
    expert, rng, most = ScriptedExpert("push-v3"), np.random.default_rng(0), 0
    obs = env.reset()
    for _ in range(200):
        noisy = expert.act(obs) + 0.5 * rng.standard_normal((16, 4))
        obs = env.step(np.clip(noisy, -1, 1).astype(np.float32))[0]
        most = max(most, int(env._d.nefc.numpy().max()))  # rows this step needed, kept or not
    assert 64 < most <= env._d.njmax, (most, env._d.njmax)
