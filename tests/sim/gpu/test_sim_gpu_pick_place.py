"""MuJoCo Warp pick-place-v3 (sim.gpu): Meta-World's reset boxes, the reset distribution, reward bounds, and
Meta-World's scripted expert (SawyerPickPlaceV3Policy, ported to torch here) picking and placing closed-loop
on Warp worlds drawn from the GPU reset distribution. Parity with CPU Meta-World: test_sim_gpu_parity.py.

Runs under ``make gpu-test`` (``.venv-gpu``); skipped in the main environment (no mujoco_warp).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
import torch

import robosteer.sim.gpu.pick_place as pick_place
from robosteer.sim.gpu import WarpPickPlaceEnv

DATA = Path(__file__).parent / "data"
torch.set_num_threads(1)


def _metaworld_init_constants() -> dict[str, tuple[float, ...]]:
    """The literal boxes in SawyerPickPlaceEnvV3.__init__, read from Meta-World's source (not imported:
    metaworld's code needs its own mujoco pin, not .venv-gpu's)."""
    spec = importlib.util.find_spec("metaworld")
    assert spec is not None and spec.submodule_search_locations
    src = Path(next(iter(spec.submodule_search_locations))) / "envs" / "sawyer_pick_place_v3.py"
    out: dict[str, tuple[float, ...]] = {}
    for node in ast.walk(ast.parse(src.read_text())):
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Tuple):
            out[target.id] = ast.literal_eval(node.value)
        if isinstance(node, ast.Dict):  # init_config: {"hand_init_pos": np.array([...]), ...}
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Call):
                    out[key.value] = tuple(ast.literal_eval(value.args[0]))
    return out


def test_reset_boxes_are_metaworlds() -> None:
    mw = _metaworld_init_constants()
    env = WarpPickPlaceEnv
    assert (mw["obj_low"], mw["obj_high"]) == (pick_place.OBJ_LOW, pick_place.OBJ_HIGH)
    assert (mw["goal_low"], mw["goal_high"]) == (env.GOAL_LOW, env.GOAL_HIGH)
    assert (mw["hand_low"], mw["hand_high"]) == (env.MOCAP_LOW, env.MOCAP_HIGH)
    assert mw["hand_init_pos"] == env.HAND_INIT_POS


def test_reset_distribution_and_reward_range() -> None:
    env = WarpPickPlaceEnv(num_worlds=512, seed=0)
    obs = env.reset(seed=11)["state"]  # (B, 39)
    obj, goal = env.obj_init_pos, env.goal
    assert obs.shape == (512, 39) and torch.equal(obs[:, 36:], goal)  # the goal is observed
    assert torch.allclose(obs[:, 4:7], obj, atol=1e-5)  # the object starts where it was placed
    quat = obs[:, 7:11]  # the object's quaternion (xyzw) is observed: upright at reset
    assert torch.allclose(quat.norm(dim=-1), torch.ones(512), atol=1e-5) and (quat[:, 3].abs() > 0.999).all()
    # Meta-World's boxes, filled edge to edge (a narrowed or shifted box fails), object on the table at 0.02.
    lo = torch.tensor([*pick_place.OBJ_LOW, *env.GOAL_LOW])
    hi = torch.tensor([*pick_place.OBJ_HIGH, *env.GOAL_HIGH])
    both = torch.cat([obj, goal], dim=-1)  # (B, 6)
    assert ((both >= lo) & (both <= hi)).all()
    span = (hi - lo).clamp(min=1e-9)
    assert ((both.min(0).values - lo) / span < 0.03).all() and ((hi - both.max(0).values) / span < 0.03).all()
    assert torch.equal(obj[:, 2], torch.full((512,), 0.02))
    assert ((obj[:, :2] - goal[:, :2]).norm(dim=-1) >= 0.15).all()
    gen = torch.Generator().manual_seed(0)
    small = WarpPickPlaceEnv(num_worlds=32, seed=0)
    small.reset(seed=11)
    assert torch.equal(small.goal, goal[:32])  # an initial state depends on its episode seed alone
    for _ in range(3):
        _, reward, _, _, info = small.step(torch.rand(32, 4, generator=gen) * 2 - 1)
        assert ((reward >= 0) & (reward <= 10)).all() and not info["success"].any()
        assert ((info["grasp_reward"] >= 0) & (info["grasp_reward"] <= 1)).all()
        assert set(info) >= {"near_object", "in_place_reward", "obj_to_target", "unscaled_reward"}


def expert_action(state: torch.Tensor) -> torch.Tensor:
    """Meta-World's SawyerPickPlaceV3Policy (metaworld 3.1.1) on (B, 39) observations -> (B, 4) in [-1, 1]."""
    hand, gap, goal = state[:, :3], state[:, 3], state[:, 36:39]
    puck = state[:, 4:7] + torch.tensor([-0.005, 0.0, 0.0], dtype=state.dtype)
    above = puck + torch.tensor([0.0, 0.0, 0.1], dtype=state.dtype)
    down = puck + torch.tensor([0.0, 0.0, 0.03], dtype=state.dtype)
    far_xy = ((hand[:, :2] - puck[:, :2]).norm(dim=-1) > 0.02)[:, None]
    high = (((hand[:, 2] - puck[:, 2]).abs() > 0.05) & (puck[:, 2] < 0.04))[:, None]
    closing = (gap > 0.73)[:, None]
    target = torch.where(far_xy, above, torch.where(high, down, torch.where(closing, hand, goal)))
    grab = ((hand - state[:, 4:7]).norm(dim=-1) < 0.07).to(state.dtype)
    return torch.cat([10.0 * (target - hand), grab[:, None]], dim=-1).clamp(-1.0, 1.0)


def test_expert_port_matches_metaworld_policy() -> None:
    ref = np.load(DATA / "pick_place_v3_reference.npz")
    expert = ref["expert"]
    obs = np.concatenate([ref["obs0"][:, None], ref["obs"][:, :-1]], axis=1)[expert]  # (E, T, 39) acted on
    actions = expert_action(torch.from_numpy(obs.reshape(-1, 39)).double()).numpy()
    np.testing.assert_allclose(actions, ref["actions"][expert].reshape(-1, 4), atol=1e-5)


def test_scripted_expert_picks_and_places_closed_loop() -> None:
    env = WarpPickPlaceEnv(num_worlds=8, seed=0, terminate_on_success=False)
    obs = env.reset(seed=3)["state"]
    first = torch.full((8,), -1)
    lifted = torch.zeros(8, dtype=torch.bool)
    for t in range(90):
        out, reward, _, _, info = env.step(expert_action(obs))
        obs = out["state"]
        lifted |= obs[:, 6] > env.obj_init_pos[:, 2] + 0.02  # carried off the table, not pushed
        first = torch.where((first < 0) & info["success"], torch.full_like(first, t), first)
    # Meta-World's expert succeeds on pick-place in every episode, ~50 steps in (62 at most over 100 seeds).
    assert (first >= 0).all() and (first <= 80).all(), first
    assert lifted.all()
    assert (info["obj_to_target"] < 0.07).all() and (reward >= 9.99).sum() >= 6  # placed, mostly on 10
