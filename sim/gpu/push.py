"""push-v3 on MuJoCo Warp: Meta-World's push reset distribution, reward and success as batched torch code.

Ported from ``metaworld/envs/sawyer_push_v3.py`` (metaworld==3.1.1, reward_function_version "v2") and
``SawyerXYZEnv._gripper_caging_reward`` (high density): puck and goal xy uniform in their boxes, redrawn
until at least 0.15 apart, both at the puck's resting height; success ``||puck - goal|| <= 0.05``.
Meta-World's ``grasp_success`` info term needs a contact query and is not ported.
"""

from __future__ import annotations

import torch

from robosteer.sim.gpu.reach import MIN_OBJ_GOAL_XY, OBJ_HIGH, OBJ_LOW
from robosteer.sim.gpu.sawyer import WarpSawyerEnv, long_tail_tolerance, sample_obj_goal

TARGET_RADIUS = 0.05


class WarpPushEnv(WarpSawyerEnv):
    """Batched push-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_push_v3.xml"
    TASK = "push-v3"
    HAND_INIT_POS = (0.0, 0.6, 0.2)
    MOCAP_LOW = (-0.5, 0.40, 0.05)
    MOCAP_HIGH = (0.5, 1.0, 0.5)
    GOAL_LOW = (-0.1, 0.8, 0.01)
    GOAL_HIGH = (0.1, 0.9, 0.02)
    DEFAULT_MAX_STEPS = 200  # sim.tasks' push-v3 default

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> puck (n, 3) and goal (n, 3), both at the puck's resting height."""
        vec = sample_obj_goal(
            seeds, (*OBJ_LOW, *self.GOAL_LOW), (*OBJ_HIGH, *self.GOAL_HIGH), MIN_OBJ_GOAL_XY
        )
        z = self.settled_obj_pos[2].expand(vec.shape[0], 1)  # (n, 1)
        return torch.cat([vec[:, :2], z], -1), torch.cat([vec[:, 3:5], z], -1)

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        obj, tcp_opened = obs[:, 4:7], obs[:, 3]
        tcp_to_obj = (obj - self.tcp_center()).norm(dim=-1)  # (B,)
        target_to_obj = (obj - self.goal).norm(dim=-1)
        in_place = long_tail_tolerance(
            target_to_obj, TARGET_RADIUS, (self.obj_init_pos - self.goal).norm(dim=-1)
        )
        grasped = self._gripper_caging(action, obj, obj_radius=0.015, pad_success_thresh=0.05)
        reward = 2 * grasped
        near = (tcp_to_obj < 0.02) & (tcp_opened > 0)
        reward = torch.where(near, 1.0 + 2 * reward + 5.0 * in_place, reward)
        reward = torch.where(target_to_obj < TARGET_RADIUS, torch.full_like(reward, 10.0), reward)
        terms = {
            "near_object": (tcp_to_obj <= 0.03).float(),
            "grasp_reward": grasped,
            "in_place_reward": in_place,
            "obj_to_target": target_to_obj,
            "unscaled_reward": reward,
        }
        return reward, target_to_obj <= TARGET_RADIUS, terms
