"""door-open-v3 on MuJoCo Warp: Meta-World's door reset, reward and success as batched torch code.

Ported from ``metaworld/envs/sawyer_door_v3.py`` (metaworld==3.1.1, reward_function_version "v2"): the door
(body ``door``) is moved per episode to a point uniform in (0, 0.85, 0.15)..(0.1, 0.95, 0.15) (a model
position, kept per world here), closed (hinge ``doorjoint``, qpos[9] = 0); the goal is ``door + (-0.3, -0.45,
0)``. The object is geom ``handle`` (position, scipy quaternion of its frame). Reward
``2 * hamacher(ready, grab effort) + 8 * opened``, 10 once ``|handle_x - goal_x| <= 0.08`` (also success),
where ``ready`` keeps the hand above a funnel around the handle and near the handle's inner side, and
``opened`` = 0.2 for any opening past 2 degrees + 0.8 * tolerance of the angle to 120 degrees.
"""

from __future__ import annotations

import math

import torch

from robosteer.sim.gpu.sawyer import (
    WarpSawyerEnv,
    hamacher_product,
    long_tail_tolerance,
    quat_xyzw_from_matrix,
    sample_box,
)

OBJ_LOW, OBJ_HIGH = (0.0, 0.85, 0.15), (0.1, 0.95, 0.15)
GOAL_OFFSET = (-0.3, -0.45, 0.0)
FUNNEL_RADIUS = 0.12  # _reward_pos's threshold
SUCCESS_X = 0.08


class WarpDoorOpenEnv(WarpSawyerEnv):
    """Batched door-open-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_door_pull.xml"
    TASK = "door-open-v3"
    HAND_INIT_POS = (0.0, 0.6, 0.2)
    MOCAP_LOW, MOCAP_HIGH = (-0.5, 0.40, 0.05), (0.5, 1.0, 0.5)
    GOAL_LOW, GOAL_HIGH = (-0.3, 0.4, 0.1499), (-0.2, 0.5, 0.1501)
    DEFAULT_MAX_STEPS = 200
    ROOT_BODY = "door"
    OBJ_BODY = "door_link"
    OBJ_GEOM = "handle"
    OBJ_QPOS = slice(9, 10)  # doorjoint
    OBJ_QVEL = slice(9, 10)
    JOINT_INIT = 0.0

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> door position (n, 3) and goal (n, 3)."""
        door = sample_box(seeds, OBJ_LOW, OBJ_HIGH)
        return door, door + torch.tensor(GOAL_OFFSET, device=door.device)

    def _object_pos(self) -> torch.Tensor:
        return self._geom_xpos[:, self._obj_geom]

    def _object_quat(self) -> torch.Tensor:
        return quat_xyzw_from_matrix(self._geom_xmat[:, self._obj_geom])

    def _reward_pos(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Meta-World's ``_reward_pos``: (ready to open, opened), (B,) each."""
        hand = obs[:, :3]
        door = obs[:, 4:7] + torch.tensor((-0.05, 0.0, 0.0), device=obs.device)  # (B, 3)
        radius = (hand[:, :2] - door[:, :2]).norm(dim=-1)  # (B,)
        beyond = radius > FUNNEL_RADIUS
        log_arg = torch.where(beyond, radius - FUNNEL_RADIUS, torch.ones_like(radius))
        floor = torch.where(beyond, 0.04 * torch.log(log_arg) + 0.4, torch.zeros_like(radius))
        below = long_tail_tolerance(floor - hand[:, 2], 0.01, floor / 2.0)
        above_floor = torch.where(hand[:, 2] >= floor, torch.ones_like(floor), below)
        offset = torch.tensor((0.05, 0.03, -0.01), device=obs.device)
        in_place = long_tail_tolerance(
            (hand - door - offset).norm(dim=-1), FUNNEL_RADIUS / 2.0, torch.full_like(radius, 0.5)
        )
        ready = hamacher_product(above_floor, in_place)
        theta = self._qpos[:, self.OBJ_QPOS.start]  # (B,) door angle (negative opens)
        opened = 0.2 * (theta < -math.pi / 90.0).float() + 0.8 * long_tail_tolerance(
            math.pi / 2.0 + math.pi / 6.0 + theta, 0.5, torch.full_like(theta, math.pi / 3.0)
        )
        return ready, opened

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        grab = (action[:, 3].clamp(-1.0, 1.0) + 1.0) / 2.0  # (B,)
        ready, opened = self._reward_pos(obs)
        success = (obs[:, 4] - self.goal[:, 0]).abs() <= SUCCESS_X
        reward = 2.0 * hamacher_product(ready, grab) + 8.0 * opened
        reward = torch.where(success, torch.full_like(reward, 10.0), reward)
        terms = {
            "near_object": ready,
            "grasp_success": (grab >= 0.5).float(),
            "grasp_reward": grab,
            "in_place_reward": opened,
            "obj_to_target": torch.zeros_like(reward),
            "unscaled_reward": reward,
        }
        return reward, success, terms
