"""pick-place-v3 on MuJoCo Warp: Meta-World's pick-place reset distribution, reward and success in torch.

Ported from ``metaworld/envs/sawyer_pick_place_v3.py`` (metaworld==3.1.1, reward_function_version "v2"),
including its own ``_gripper_caging_reward`` override (not the base class's one that push uses):

- reset: object xyz uniform in (-0.1, 0.6, 0.02)..(0.1, 0.7, 0.02), goal xyz uniform in
  (-0.1, 0.8, 0.05)..(0.1, 0.9, 0.3), redrawn until their xy are at least 0.15 apart; the object is placed
  at the drawn point (z = 0.02, not its resting height as in push) and the goal is in the observation.
- caging: y caging of each finger pad (``tolerance(pad-to-object y, bounds=(0.015, 0.05), long_tail)``)
  with margin ``| |obj_y - pad_y| - 0.05 |``. Meta-World writes ``init_left_pad``/``init_right_pad`` as
  ``get_body_com`` *views* into ``data.xpos``, so the "initial" pad in that margin is the pad's current
  position; this port does the same (checked against the CPU reference). xz caging of the TCP with margin
  ``||obj_init_xz - init_tcp_xz|| - 0.005``; gripping ``clip(a3, 0, 1)`` once caging > 0.97.
- reward: ``hamacher(grasp, in_place)``, plus ``1 + 5 * in_place`` while the TCP is within 2 cm of the
  object, the gripper is open (obs[3] > 0) and the object is lifted 1 cm above its initial height; 10
  once ``||obj - goal|| < 0.05``. Success ``||obj - goal|| <= 0.07``.

Meta-World's ``grasp_success`` info term needs a pad-object contact-force query and is not ported (as in
push). The gripper is actuated by the shared base (``sim.gpu.sawyer``: ctrl ``[a3, -a3]``).
"""

from __future__ import annotations

import torch

from robosteer.sim.gpu.sawyer import WarpSawyerEnv, hamacher_product, long_tail_tolerance, sample_obj_goal

TARGET_RADIUS = 0.05  # compute_reward's _TARGET_RADIUS (in_place bound, the reward's 10 plateau)
SUCCESS_RADIUS = 0.07  # evaluate_state's success threshold
OBJ_LOW, OBJ_HIGH = (-0.1, 0.6, 0.02), (0.1, 0.7, 0.02)
MIN_OBJ_GOAL_XY = 0.15
OBJ_RADIUS = 0.015  # _gripper_caging_reward's constants
PAD_SUCCESS_MARGIN = 0.05


class WarpPickPlaceEnv(WarpSawyerEnv):
    """Batched pick-place-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_pick_place_v3.xml"
    TASK = "pick-place-v3"
    HAND_INIT_POS = (0.0, 0.6, 0.2)
    MOCAP_LOW = (-0.5, 0.40, 0.05)  # pick-place passes hand_low/high, which become its mocap box
    MOCAP_HIGH = (0.5, 1.0, 0.5)
    GOAL_LOW = (-0.1, 0.8, 0.05)
    GOAL_HIGH = (0.1, 0.9, 0.3)
    DEFAULT_MAX_STEPS = 200  # sim.tasks' pick-place-v3 default

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> object (n, 3) and goal (n, 3), Meta-World's rejection rule included."""
        vec = sample_obj_goal(
            seeds, (*OBJ_LOW, *self.GOAL_LOW), (*OBJ_HIGH, *self.GOAL_HIGH), MIN_OBJ_GOAL_XY
        )
        return vec[:, :3], vec[:, 3:]

    def _caging(self, action: torch.Tensor, obj: torch.Tensor) -> torch.Tensor:
        """SawyerPickPlaceEnvV3._gripper_caging_reward: (B,) in [0, 1]."""
        left_y = self.body_pos("leftpad")[:, 1]  # (B,)
        right_y = self.body_pos("rightpad")[:, 1]
        obj_y = obj[:, 1]
        # Margins against the "initial" pads, which are live views of the current pads in Meta-World.
        right_margin = ((obj_y - right_y).abs() - PAD_SUCCESS_MARGIN).abs()  # (B,)
        left_margin = ((obj_y - left_y).abs() - PAD_SUCCESS_MARGIN).abs()
        right = long_tail_tolerance(obj_y - right_y, PAD_SUCCESS_MARGIN, right_margin, lower=OBJ_RADIUS)
        left = long_tail_tolerance(left_y - obj_y, PAD_SUCCESS_MARGIN, left_margin, lower=OBJ_RADIUS)
        return self._caging_with_grip(hamacher_product(left, right), action, obj)

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        obj, tcp_opened = obs[:, 4:7], obs[:, 3]
        obj_to_target = (obj - self.goal).norm(dim=-1)  # (B,)
        tcp_to_obj = (obj - self.tcp_center()).norm(dim=-1)
        in_place = long_tail_tolerance(
            obj_to_target, TARGET_RADIUS, (self.obj_init_pos - self.goal).norm(dim=-1)
        )
        grasped = self._caging(action, obj)
        reward = hamacher_product(grasped, in_place)
        lifted = (tcp_to_obj < 0.02) & (tcp_opened > 0) & (obj[:, 2] - 0.01 > self.obj_init_pos[:, 2])
        reward = torch.where(lifted, reward + 1.0 + 5.0 * in_place, reward)
        reward = torch.where(obj_to_target < TARGET_RADIUS, torch.full_like(reward, 10.0), reward)
        terms = {
            "near_object": (tcp_to_obj <= 0.03).float(),
            "grasp_reward": grasped,
            "in_place_reward": in_place,
            "obj_to_target": obj_to_target,
            "unscaled_reward": reward,
        }
        return reward, obj_to_target <= SUCCESS_RADIUS, terms
