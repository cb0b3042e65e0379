"""button-press-topdown-v3 on MuJoCo Warp: Meta-World's reset, reward and success as batched torch code.

Ported from ``metaworld/envs/sawyer_button_press_topdown_v3.py`` (metaworld==3.1.1, reward_function_version
"v2"): the button box (body ``box``) is moved per episode to a point uniform in (-0.1, 0.8, 0.115)..(0.1,
0.9, 0.115) (a model position, kept per world here); the button slides on ``btnbox_joint`` (qpos[9], 0 at
reset). The hand starts at (0, 0.4, 0.2). The object is ``button + (0, 0, 0.193)`` with the button's
quaternion (wxyz, as Meta-World passes it); the goal is site ``hole``. Reward
``5 * hamacher(1 - gripper opening, near)`` plus ``5 * pressed`` while the TCP is within 3 cm of the button;
success ``|obj_z - goal_z| <= 0.024``.
"""

from __future__ import annotations

from typing import Any

import torch

from robosteer.sim.gpu.sawyer import WarpSawyerEnv, hamacher_product, long_tail_tolerance, sample_box

OBJ_LOW, OBJ_HIGH = (-0.1, 0.8, 0.115), (0.1, 0.9, 0.115)
HAND_LOW, HAND_HIGH = (-0.5, 0.40, 0.05), (0.5, 1.0, 0.5)
BUTTON_TOP = (0.0, 0.0, 0.193)  # _get_pos_objects: the button's top above its body origin


class WarpButtonPressTopdownEnv(WarpSawyerEnv):
    """Batched button-press-topdown-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_button_press_topdown.xml"
    TASK = "button-press-topdown-v3"
    HAND_INIT_POS = (0.0, 0.4, 0.2)
    MOCAP_LOW, MOCAP_HIGH = HAND_LOW, HAND_HIGH
    GOAL_LOW, GOAL_HIGH = HAND_LOW, HAND_HIGH
    DEFAULT_MAX_STEPS = 200
    ROOT_BODY = "box"
    OBJ_BODY = "button"
    OBJ_GEOM = "btnGeom"
    OBJ_QPOS = slice(9, 10)  # btnbox_joint
    OBJ_QVEL = slice(9, 10)
    JOINT_INIT = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.obj_to_target_init = torch.zeros(self.num_worlds, device=self.device)  # (B,)

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> box position (n, 3); the goal (the hole) follows from it (``_start_episodes``)."""
        box = sample_box(seeds, OBJ_LOW, OBJ_HIGH)
        return box, box

    def _start_episodes(self, mask: torch.Tensor) -> None:
        """Goal = site ``hole`` and the press depth ``|hole_z - buttonStart_z|`` of the placed box."""
        hole = self.site_pos("hole")
        self.goal = torch.where(mask[:, None], hole, self.goal)
        depth = (hole[:, 2] - self.site_pos("buttonStart")[:, 2]).abs()
        self.obj_to_target_init = torch.where(mask, depth, self.obj_to_target_init)

    def _object_pos(self) -> torch.Tensor:
        return self._xpos[:, self._obj] + torch.tensor(BUTTON_TOP, device=self.device)

    def _object_quat(self) -> torch.Tensor:
        return self._xquat[:, self._obj]

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        obj = obs[:, 4:7]
        tcp_to_obj = (obj - self.tcp_center()).norm(dim=-1)  # (B,)
        tcp_to_obj_init = (obj - self.init_tcp).norm(dim=-1)  # Meta-World uses the current obj here
        obj_to_target = (self.goal[:, 2] - obj[:, 2]).abs()
        near = long_tail_tolerance(tcp_to_obj, 0.01, tcp_to_obj_init)
        pressed = long_tail_tolerance(obj_to_target, 0.005, self.obj_to_target_init)
        reward = 5.0 * hamacher_product(1.0 - obs[:, 3], near)
        reward = torch.where(tcp_to_obj <= 0.03, reward + 5.0 * pressed, reward)
        terms = {
            "near_object": (tcp_to_obj <= 0.05).float(),
            "grasp_success": (obs[:, 3] > 0).float(),
            "grasp_reward": near,
            "in_place_reward": pressed,
            "obj_to_target": obj_to_target,
            "unscaled_reward": reward,
        }
        return reward, obj_to_target <= 0.024, terms
