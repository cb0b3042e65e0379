"""reach-v3 on MuJoCo Warp: Meta-World's reach reset distribution, reward and success as batched torch code.

Ported from ``metaworld/envs/sawyer_reach_v3.py`` (metaworld==3.1.1, reward_function_version "v2"):
object and goal uniform in their boxes, redrawn until their xy distance is at least 0.15; reward
``10 * tolerance(||tcp - goal||, bounds=(0, 0.05), margin=||hand_init_pos - goal||, long_tail)``;
success ``||tcp - goal|| <= 0.05``.
"""

from __future__ import annotations

import torch

from robosteer.sim.gpu.sawyer import WarpSawyerEnv, long_tail_tolerance, sample_obj_goal

TARGET_RADIUS = 0.05
OBJ_LOW, OBJ_HIGH = (-0.1, 0.6, 0.02), (0.1, 0.7, 0.02)
MIN_OBJ_GOAL_XY = 0.15


class WarpReachEnv(WarpSawyerEnv):
    """Batched reach-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_reach_v3.xml"
    TASK = "reach-v3"
    HAND_INIT_POS = (0.0, 0.6, 0.2)
    MOCAP_LOW = (-0.5, 0.40, 0.05)  # reach passes hand_low/high, which become its mocap box
    MOCAP_HIGH = (0.5, 1.0, 0.5)
    GOAL_LOW = (-0.1, 0.8, 0.05)
    GOAL_HIGH = (0.1, 0.9, 0.3)
    DEFAULT_MAX_STEPS = 200  # sim.tasks' reach-v3 default

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> object (n, 3) and goal (n, 3) positions, Meta-World's rejection rule included."""
        vec = sample_obj_goal(
            seeds, (*OBJ_LOW, *self.GOAL_LOW), (*OBJ_HIGH, *self.GOAL_HIGH), MIN_OBJ_GOAL_XY
        )
        return vec[:, :3], vec[:, 3:]

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        dist = (self.tcp_center() - self.goal).norm(dim=-1)  # (B,)
        hand_init = torch.tensor(self.HAND_INIT_POS, dtype=dist.dtype, device=dist.device)
        margin = (hand_init - self.goal).norm(dim=-1)  # (B,)
        in_place = long_tail_tolerance(dist, TARGET_RADIUS, margin)  # (B,)
        reward = 10.0 * in_place
        terms = {
            "near_object": dist,
            "grasp_success": torch.ones_like(dist),
            "grasp_reward": dist,
            "in_place_reward": in_place,
            "obj_to_target": dist,
            "unscaled_reward": reward,
        }
        return reward, dist <= TARGET_RADIUS, terms
