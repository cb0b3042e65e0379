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

The reset observation from the same state matches to 1e-5 [0] for both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
import torch

from sim.gpu import WarpPushEnv, WarpReachEnv

DATA = Path(__file__).parent / "data"
ENVS = {"reach-v3": WarpReachEnv, "push-v3": WarpPushEnv}


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
