"""Parity of the MuJoCo Warp ports that place a model body per episode (door, drawers, windows, button, the
peg's box) with CPU MuJoCo and Meta-World.

Runs under ``make gpu-test`` (``.venv-gpu``); skipped in the main environment. References:
``data/<task>_reference.npz`` from ``make_reference.py`` (CPU Meta-World, mujoco 3.3.0; 6 episodes x 150
steps (peg-insert-side 320), 4 scripted-expert episodes and 2 of uniform random actions; the body Meta-World moved, the fresh reset
frame and the reward's per-episode quantities recorded with them). Each reference's initial states and actions
are replayed on Warp and, in the same test, on CPU MuJoCo 4.0 (the version Warp ports), so the physics of the
port is compared with the physics of its own version:

- Warp vs CPU MuJoCo 4.0, same states and actions (``TOLERANCE``, measured worst case in brackets): drawer-open,
  window-open and window-close meet the issue's bar (hand 2 mm, joint 5 mm); drawer-close's random episode
  pushes the hand 2.9 mm apart; button-press-topdown (hand 5.6 mm, joint 2.6 mm), door-open (hand 13.5 mm,
  hinge 0.028 rad, over 150 steps of pulling) and peg-insert-side (hand 9.2 mm, peg 9.4 mm through grasp and
  insertion) do not: Warp's contacts differ from CPU MuJoCo's there.
- Warp vs Meta-World (mujoco 3.3.0): the hand drifts apart by up to 2 cm in the expert episodes, and CPU MuJoCo
  4.0 drifts the same (checked: the two agree to 0.1 mm over the first 14 steps of button-press-topdown, both
  1.6 mm off the reference); success: every expert episode succeeds on both, the first success within 2 steps
  [2], the random episodes agree.
- From the very same states (the reference's per-step qpos, observations, actions and per-episode reward
  quantities): reward within 1e-3 [1.6e-5] and success flags equal at every step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
import mujoco
import torch

from robosteer.sim import gpu

DATA = Path(__file__).parent / "data"
ENVS = {
    "door-open-v3": gpu.WarpDoorOpenEnv,
    "drawer-open-v3": gpu.WarpDrawerOpenEnv,
    "drawer-close-v3": gpu.WarpDrawerCloseEnv,
    "button-press-topdown-v3": gpu.WarpButtonPressTopdownEnv,
    "window-open-v3": gpu.WarpWindowOpenEnv,
    "window-close-v3": gpu.WarpWindowCloseEnv,
    "peg-insert-side-v3": gpu.WarpPegInsertSideEnv,
}
# Warp vs CPU MuJoCo 4.0: (hand m, object joint m or rad), measured worst case in the comments.
TOLERANCE = {
    "door-open-v3": (0.02, 0.04),  # [0.0135, 0.028 rad]
    "drawer-open-v3": (2e-3, 5e-3),  # [<1e-4, <1e-4]
    "drawer-close-v3": (4e-3, 5e-3),  # [0.0029, 3e-4]
    "button-press-topdown-v3": (8e-3, 5e-3),  # [0.0056, 0.0026]
    "window-open-v3": (2e-3, 5e-3),  # [6e-4, 2e-4]
    "window-close-v3": (2e-3, 5e-3),  # [4e-4, 1.7e-3]
    "peg-insert-side-v3": (0.015, 0.015),  # [0.0092, 0.0094: the peg's x through grasp and insertion]
}


def _load(task: str) -> dict[str, np.ndarray]:
    return dict(np.load(DATA / f"{task.replace('-', '_')}_reference.npz"))


def _start(task: str, ref: dict[str, np.ndarray]) -> tuple[gpu.WarpSawyerEnv, np.ndarray]:
    """The Warp env in the reference's initial states: (env, reset observation (E, 39))."""
    torch.set_num_threads(1)
    E = ref["actions"].shape[0]
    env = ENVS[task](num_worlds=E, max_episode_steps=500, terminate_on_success=False)
    t = lambda k: torch.from_numpy(ref[k])  # noqa: E731
    obs0 = env.set_state(
        t("qpos"),
        t("qvel"),
        t("mocap_pos"),
        t("goal"),
        t("qacc_warmstart"),
        t("ctrl"),
        root_pos=t("root_pos"),
    )
    return env, obs0["state"].numpy()


@pytest.fixture(scope="module", params=sorted(ENVS))
def replay(request: pytest.FixtureRequest) -> dict[str, np.ndarray]:
    """The reference's initial states and actions replayed on MuJoCo Warp (CPU device)."""
    task, ref = request.param, _load(request.param)
    env, obs0 = _start(task, ref)
    cpu = _CpuMujoco(env, ref)
    obs, joint, succ, cpu_hand, cpu_joint = [], [], [], [], []
    for k in range(ref["actions"].shape[1]):
        o, _, _, _, info = env.step(torch.from_numpy(ref["actions"][:, k]))
        obs.append(o["state"].numpy())
        joint.append(env._qpos[:, 9].numpy().copy())
        succ.append(info["success"].numpy())
        hand, jnt = cpu.step(ref["actions"][:, k])
        cpu_hand.append(hand)
        cpu_joint.append(jnt)
    return {
        **ref,
        "task": np.asarray(task),
        "warp_obs0": obs0,
        "warp_obs": np.stack(obs, 1),  # (E, T, 39)
        "warp_joint": np.stack(joint, 1),  # (E, T)
        "warp_success": np.stack(succ, 1),  # (E, T)
        "cpu4_hand": np.stack(cpu_hand, 1),  # (E, T, 3)
        "cpu4_joint": np.stack(cpu_joint, 1),  # (E, T)
    }


class _CpuMujoco:
    """The same episodes on CPU MuJoCo (Warp's version), with the port's actuation: mocap += 0.01 * a[:3]
    clipped to the mocap box, gripper ctrl [a3, -a3], 5 physics steps."""

    def __init__(self, env: gpu.WarpSawyerEnv, ref: dict[str, np.ndarray]) -> None:
        self.env, self.model, self.ref = env, env.model, ref
        self.datas = []
        for e in range(ref["actions"].shape[0]):
            d = mujoco.MjData(self.model)
            d.qpos[:], d.qvel[:], d.qacc_warmstart[:], d.ctrl[:] = (
                ref[k][e] for k in ("qpos", "qvel", "qacc_warmstart", "ctrl")
            )
            d.mocap_pos[0], d.mocap_quat[0] = ref["mocap_pos"][e], np.array([1.0, 0.0, 1.0, 0.0]) / 2**0.5
            self.datas.append(d)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(E, 4) actions -> hand positions (E, 3), object joints (E,)."""
        env, hands, joints = self.env, [], []
        for e, d in enumerate(self.datas):
            self.model.body_pos[env._root] = self.ref["root_pos"][e]
            a = np.clip(actions[e], -1.0, 1.0)
            d.mocap_pos[0] = np.clip(d.mocap_pos[0] + a[:3] * 0.01, env.MOCAP_LOW, env.MOCAP_HIGH)
            d.ctrl[:] = (a[3], -a[3])
            mujoco.mj_step(self.model, d, nstep=env.frame_skip)
            mujoco.mj_forward(self.model, d)
            hands.append(d.xpos[env._hand].copy())
            joints.append(d.qpos[9])
        return np.stack(hands), np.asarray(joints)


def test_reset_observation_is_the_placed_scene(replay: dict[str, np.ndarray]) -> None:
    """Both frames of the reset observation are the placed scene's (Meta-World's after kinematics), the goal
    is Meta-World's."""
    frame0 = replay["frame0"]  # (E, 18)
    np.testing.assert_allclose(replay["warp_obs0"][:, :18], frame0, atol=1e-4)
    np.testing.assert_allclose(replay["warp_obs0"][:, 18:36], frame0, atol=1e-4)
    np.testing.assert_allclose(replay["warp_obs0"][:, 36:], replay["obs0"][:, 36:], atol=1e-5)


def test_trajectories_track_cpu_mujoco(replay: dict[str, np.ndarray]) -> None:
    """Warp against CPU MuJoCo of its own version, same states and actions (``TOLERANCE``)."""
    hand_tol, joint_tol = TOLERANCE[str(replay["task"])]
    hand = np.abs(replay["warp_obs"][..., :3] - replay["cpu4_hand"]).max()
    joint = np.abs(replay["warp_joint"] - replay["cpu4_joint"]).max()
    moved = np.abs(replay["qpos_traj"][:4, :, 9] - replay["qpos"][:4, None, 9]).max()
    print(f"{replay['task']}: hand {hand:.2e} joint {joint:.2e} (the experts moved the joint {moved:.3f})")
    assert moved > 0.05, "the experts really move the object's joint"
    assert hand <= hand_tol, "hand position"
    assert joint <= joint_tol, "object joint"
    np.testing.assert_allclose(replay["warp_obs"][..., 36:], replay["obs"][..., 36:], atol=1e-5)  # goal


def test_success_agrees_with_meta_world(replay: dict[str, np.ndarray]) -> None:
    expert = replay["expert"]
    warp, cpu = replay["warp_success"], replay["success"]
    assert cpu[expert].any(axis=1).all()  # the reference experts do succeed
    np.testing.assert_array_equal(warp.any(axis=1), cpu.any(axis=1))
    first_gap = np.abs(warp[expert].argmax(axis=1) - cpu[expert].argmax(axis=1))
    assert first_gap.max() <= 2, first_gap


@pytest.mark.parametrize("task", sorted(ENVS))
def test_reward_from_the_same_states(task: str) -> None:
    """Reward and success evaluated on the reference's own states, with Meta-World's per-episode quantities
    (its stale window handle included), isolate the ported reward from physics drift."""
    ref = _load(task)
    env, _ = _start(task, ref)
    t = lambda k: torch.from_numpy(ref[k]).float()  # noqa: E731
    # The hand settles 0.3 mm apart under mujoco 4.0 (Warp's) and 3.3.0 (Meta-World's): use Meta-World's.
    env.init_tcp = t("meta_init_tcp")[0]
    if "meta_window_handle_pos_init" in ref:
        env.handle_init[:] = t("meta_window_handle_pos_init")
    if "meta_peg_head_pos_init" in ref:  # the default peg's head, settled 0.1 mm apart under the two versions
        np.testing.assert_allclose(env.peg_head_init.numpy(), ref["meta_peg_head_pos_init"], atol=2e-4)
        env.peg_head_init = t("meta_peg_head_pos_init")
    if "meta_obj_to_target_init" in ref:
        env.obj_to_target_init[:] = t("meta_obj_to_target_init")
    if task == "drawer-close-v3":
        env.obj_init_pos[:] = t("meta_obj_init_pos")
    rewards, flags = [], []
    for k in range(ref["actions"].shape[1]):
        env._qpos[:] = t("qpos_traj")[:, k]
        env._kinematics()
        reward, success, _ = env._evaluate(t("obs")[:, k], t("actions")[:, k])
        rewards.append(reward.numpy())
        flags.append(success.numpy())
    got = np.stack(rewards, 1)
    assert ref["reward"].max() > 1.0  # the experts earn more than the shaping floor
    np.testing.assert_array_equal(np.stack(flags, 1), ref["success"])
    np.testing.assert_allclose(got, ref["reward"], atol=1e-3)
