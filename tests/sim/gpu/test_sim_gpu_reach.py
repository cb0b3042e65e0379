"""MuJoCo Warp reach-v3 (sim.gpu): reset distribution, seeds, the step protocol and auto-reset.

Runs under ``make gpu-test`` (``.venv-gpu``); skipped in the main environment (no mujoco_warp). Parity with
CPU Meta-World: test_sim_gpu_parity.py.
"""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco_warp")
import torch

from robosteer.sim.gpu import WarpReachEnv
from robosteer.sim.gpu.sawyer import quat_xyzw_from_matrix


def test_reset_distribution_and_seeds() -> None:
    env = WarpReachEnv(num_worlds=256, seed=3)
    obs = env.reset(seed=7)["state"]  # (B, 39)
    obj, goal = env.obj_init_pos, env.goal
    assert obs.shape == (256, 39) and obs.dtype == torch.float32
    assert torch.equal(obs[:, 36:], goal) and torch.equal(obs[:, :18], obs[:, 18:36])
    assert (obj[:, 0].abs() <= 0.1).all() and ((obj[:, 1] >= 0.6) & (obj[:, 1] <= 0.7)).all()
    assert ((goal >= torch.tensor(env.GOAL_LOW)) & (goal <= torch.tensor(env.GOAL_HIGH))).all()
    assert ((obj[:, :2] - goal[:, :2]).norm(dim=-1) >= 0.15).all()
    assert goal[:, 2].std() > 0.05  # really spread over the box, not one point
    # An initial state is a function of its episode seed alone: same seed -> same state, any batch size.
    small = WarpReachEnv(num_worlds=2)
    small.reset(seed=7)
    assert torch.equal(small.goal, goal[:2]) and torch.equal(small.episode_seeds, env.episode_seeds[:2])
    small.reset(seed=8)
    assert not torch.equal(small.goal, goal[:2])


def test_step_protocol_and_auto_reset() -> None:
    env = WarpReachEnv(num_worlds=3, seed=0, max_episode_steps=30)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(torch.zeros(3, 4))
    obs = env.reset(seed=0)["state"]
    with pytest.raises(ValueError, match=r"expected \(3, 4\)"):
        env.step(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="NaN"):
        env.step(torch.full((3, 4), float("nan")))
    seeds0 = env.episode_seeds.clone()
    done_any = torch.zeros(3, dtype=torch.bool)
    for _ in range(30):
        action = torch.zeros(3, 4)
        action[0, :3] = ((env.goal[0] - obs[0, :3]) * 25).clamp(-1, 1)  # world 0 reaches; others idle
        out, reward, terminated, truncated, info = env.step(action)
        assert reward.shape == (3,) and info["success"].dtype == torch.bool
        if terminated[0]:
            assert info["success"][0] and reward[0] == 10.0
            assert info["final_obs"]["state"][0].sub(out["state"][0]).abs().max() > 0.01  # new episode
            assert env.episode_seeds[0] != seeds0[0] and env._steps[0] == 0
        done_any |= terminated
        obs = out["state"]
    assert done_any[0] and not done_any[1:].any()
    assert truncated[1:].all() and (info["episode_length"][1:] == 30).all()
    assert (env.episode_seeds[1:] != seeds0[1:]).all()  # truncated worlds auto-reset too


def test_quaternion_matches_scipy_convention() -> None:
    # 180 degrees about x: scipy gives (1, 0, 0, 0) in xyzw (its trace branch would divide by ~0).
    rx = torch.tensor([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]])
    assert torch.allclose(quat_xyzw_from_matrix(rx), torch.tensor([1.0, 0, 0, 0]))
    rz = torch.tensor([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])  # +90 degrees about z
    assert torch.allclose(quat_xyzw_from_matrix(rz), torch.tensor([0, 0, 2**-0.5, 2**-0.5]))
