"""Parity of sim.gpu's MuJoCo Warp tasks with CPU Meta-World, from the same initial states and actions.

Runs under ``make gpu-test`` (``.venv-gpu``, warp's CPU device when there is no GPU); skipped in the main
environment. References: ``data/<task>_reference.npz`` recorded from CPU Meta-World (mujoco 3.3.0) by
``make_reference.py``: 6 episodes x 100 steps, the first 4 following Meta-World's scripted expert, the other
2 uniform random actions. Tolerances per task (measured max deviation in brackets):

- reach-v3: hand position 2e-3 m [9e-4]; every observation entry 5e-3 [1.2e-3]; dense reward 0.1 of 10
  [0.035]; success flags equal at every step [equal].
- push-v3 (contact-rich: the puck is pushed by the fingers): hand 2e-3 m [1.2e-3]; puck position 5e-3 m
  [2.2e-3]; gripper opening 0.15 [0.078]; puck quaternion 0.1 [0.035]; dense reward: mean 0.3 [0.046], any
  step 3.0 [2.1] (its thresholded terms, e.g. tcp-to-puck < 2 cm, flip a step apart); success:
  every expert episode succeeds on both, first success within 2 steps [1], random episodes agree.
- pick-place-v3 (contact-rich: the object is grasped, lifted and carried to a goal in the air): hand
  2e-3 m [1.4e-3]; object position 5e-3 m [2.2e-3]; gripper opening 0.15 [0.080]; object quaternion 0.05
  [0.012]; goal exact; dense reward: mean 0.05 [0.008], off by more than 0.1 at no more than 3 of the 600
  steps [1: the 10-plateau reached a step apart, off by 3.0]; success: every expert episode succeeds on
  both, first success within 2 steps [0], flags differ at no more than 2 steps per episode [0].
  From the very same states (the reference's per-step qpos, so no physics drift): reward 1e-3 [3.2e-5],
  grasp (caging) reward 2e-3 [2.4e-4], in-place reward 1e-5 [2.4e-7], success flags equal [equal]; e.g.
  the base class's caging (push's) instead of pick-place's own is off by 0.74 in grasp reward there.

The reset observation from the same state matches to 1e-5 [0; pick-place 7e-8] for all three.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
import torch

from robosteer.sim.gpu import WarpPickPlaceEnv, WarpPushEnv, WarpReachEnv

DATA = Path(__file__).parent / "data"
ENVS = {"reach-v3": WarpReachEnv, "push-v3": WarpPushEnv, "pick-place-v3": WarpPickPlaceEnv}


@pytest.fixture(scope="module", params=sorted(ENVS))
def replay(request: pytest.FixtureRequest) -> dict[str, np.ndarray]:
    """The reference's initial states and actions replayed on MuJoCo Warp (CPU device)."""
    torch.set_num_threads(1)
    ref = dict(np.load(DATA / f"{request.param.replace('-', '_')}_reference.npz"))
    E, T = ref["actions"].shape[:2]
    env = ENVS[request.param](num_worlds=E, max_episode_steps=500, terminate_on_success=False)
    t = lambda k: torch.from_numpy(ref[k])  # noqa: E731
    obs0 = env.set_state(t("qpos"), t("qvel"), t("mocap_pos"), t("goal"), t("qacc_warmstart"), t("ctrl"))
    obs, rew, succ = [], [], []
    for k in range(T):
        o, r, terminated, truncated, info = env.step(t("actions")[:, k])
        assert not terminated.any() and not truncated.any()
        obs.append(o["state"].numpy())
        rew.append(r.numpy())
        succ.append(info["success"].numpy())
    return {
        **ref,
        "task": np.asarray(request.param),
        "warp_obs0": obs0["state"].numpy(),
        "warp_obs": np.stack(obs, 1),  # (E, T, 39)
        "warp_reward": np.stack(rew, 1),  # (E, T)
        "warp_success": np.stack(succ, 1),  # (E, T)
    }


def _max_err(replay: dict[str, np.ndarray], cols: slice) -> float:
    return float(np.abs(replay["warp_obs"][..., cols] - replay["obs"][..., cols]).max())


def test_reset_observation_matches_cpu(replay: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(replay["warp_obs0"], replay["obs0"], atol=1e-5)


def test_observations_and_rewards_track_cpu(replay: dict[str, np.ndarray]) -> None:
    cpu = replay["obs"]
    # The hand really moved (a frozen sim would meet a loose bound only by luck).
    assert np.abs(cpu[:, -1, :3] - replay["obs0"][:, :3]).max() > 0.05
    assert _max_err(replay, slice(0, 3)) <= 2e-3, "hand position"
    reward_err = np.abs(replay["warp_reward"] - replay["reward"])  # (E, T)
    if str(replay["task"]) == "reach-v3":
        np.testing.assert_allclose(replay["warp_obs"], cpu, atol=5e-3)
        assert reward_err.max() <= 0.1
    elif str(replay["task"]) == "pick-place-v3":
        assert _max_err(replay, slice(4, 7)) <= 5e-3, "object position"
        assert _max_err(replay, slice(3, 4)) <= 0.15, "gripper opening"
        assert _max_err(replay, slice(7, 11)) <= 0.05, "object quaternion"
        np.testing.assert_allclose(replay["warp_obs"][..., 36:], cpu[..., 36:], atol=1e-6)  # goal
        assert reward_err.mean() <= 0.05 and (reward_err > 0.1).sum() <= 3, np.sort(reward_err.ravel())[-5:]
        # The experts really lift the object (2 cm and more) and earn the lift bonus and the 10 plateau.
        assert (cpu[:4, :, 6].max(axis=1) - replay["obs0"][:4, 6] > 0.02).all()
        assert (replay["reward"][:4].max(axis=1) == 10.0).all()
    else:
        assert _max_err(replay, slice(4, 7)) <= 5e-3, "puck position"
        assert _max_err(replay, slice(3, 4)) <= 0.15, "gripper opening"
        assert _max_err(replay, slice(7, 11)) <= 0.1, "puck quaternion"
        np.testing.assert_allclose(replay["warp_obs"][..., 36:], cpu[..., 36:], atol=1e-6)  # goal
        assert reward_err.mean() <= 0.3 and reward_err.max() <= 3.0, (reward_err.mean(), reward_err.max())
        # The puck really moved in the expert episodes.
        assert np.abs(cpu[:4, -1, 4:6] - replay["obs0"][:4, 4:6]).max() > 0.1


def test_success_flags_agree_on_expert_rollouts(replay: dict[str, np.ndarray]) -> None:
    expert = replay["expert"]
    warp, cpu = replay["warp_success"], replay["success"]
    assert cpu[expert].any(axis=1).all()  # the reference experts do succeed
    np.testing.assert_array_equal(warp.any(axis=1), cpu.any(axis=1))
    if str(replay["task"]) == "reach-v3":
        np.testing.assert_array_equal(warp, cpu)
    else:
        first_gap = np.abs(warp[expert].argmax(axis=1) - cpu[expert].argmax(axis=1))
        assert first_gap.max() <= 2, first_gap
    if str(replay["task"]) == "pick-place-v3":
        assert (warp != cpu).sum(axis=1).max() <= 2, (warp != cpu).sum(axis=1)


def test_pick_place_reward_from_the_same_states() -> None:
    """pick-place's reward, caging and in-place terms and success evaluated on the reference's own states.

    The reference records Meta-World's state after every step, so this isolates the ported reward from
    physics drift: each piece (caging margins, tolerance bounds, the lift bonus, the 10 plateau, the 0.07
    success radius) must match to float32 precision.
    """
    torch.set_num_threads(1)
    ref = dict(np.load(DATA / "pick_place_v3_reference.npz"))
    E, T = ref["actions"].shape[:2]
    t = lambda k: torch.from_numpy(ref[k])  # noqa: E731
    env = WarpPickPlaceEnv(num_worlds=E)
    env.set_state(t("qpos"), t("qvel"), t("mocap_pos"), t("goal"), t("qacc_warmstart"), t("ctrl"))
    keys = ("reward", "success", "grasp_reward", "in_place_reward")
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for k in range(T):
        # Meta-World's state after step k; obj_init_pos stays the reset's, as in Meta-World.
        env._qpos[:] = t("qpos_traj")[:, k]
        env._kinematics()
        reward, success, terms = env._evaluate(t("obs")[:, k], t("actions")[:, k])
        out["reward"].append(reward.numpy())
        out["success"].append(success.numpy())
        for key in ("grasp_reward", "in_place_reward"):
            out[key].append(terms[key].numpy())
    got = {k: np.stack(v, axis=1) for k, v in out.items()}  # (E, T) each
    lift_bonus = (ref["reward"] > 1.0) & (ref["reward"] < 10.0)
    assert ref["reward"].max() == 10.0 and lift_bonus.any()
    assert ref["grasp_reward"].max() > 0.9  # the experts cage and grip
    np.testing.assert_array_equal(got["success"], ref["success"])
    np.testing.assert_allclose(got["reward"], ref["reward"], atol=1e-3)
    np.testing.assert_allclose(got["grasp_reward"], ref["grasp_reward"], atol=2e-3)
    np.testing.assert_allclose(got["in_place_reward"], ref["in_place_reward"], atol=1e-5)
