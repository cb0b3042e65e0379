"""peg-insert-side-v3 on MuJoCo Warp: Meta-World's reset, reward and success as batched torch code.

Ported from ``metaworld/envs/sawyer_peg_insertion_side_v3.py`` (metaworld==3.1.1, reward_function_version "v2"):
the peg (a free body, qpos[9:16]) is placed uniform in (0, 0.5, 0.02)..(0.2, 0.7, 0.02) and the box with the
hole (body ``box``, moved per episode: a model position, kept per world here) in (-0.35, 0.4, -0.001)..(-0.25,
0.7, 0.001), redrawn until their xy are 0.1 apart; the goal is ``box + (0.03, 0, 0.13)``, the hole's mouth.
The object is site ``pegGrasp`` (position, scipy quaternion of its frame).

Reward: the peg head's distance to the goal, scaled (1, 2, 2) so the peg must be lifted to the hole's height,
gives ``in_place`` (long-tail, radius 0.07), multiplied (hamacher) by two collision-box terms that are 1
outside the boxes beside the hole; caging (``_gripper_caging_reward``: object radius 0.0075, pad threshold 0.03)
is 1 once the peg is held and lifted; reward ``hamacher(grasp, in_place)`` + ``1 + 5 * in_place`` while held
and lifted, 10 once the head is within 0.07 (also success).

Faithful where it surprises: Meta-World takes the peg head's "initial" position (in_place's margin) before it
moves the peg, right after ``mj_resetData`` and the hand's settling, so it is always the head of the peg at the
model's default place (-0.1, 0.6, 0.015), whatever the episode; this port uses the same point.
"""

from __future__ import annotations

from typing import Any

import mujoco
import torch

from robosteer.sim.gpu.sawyer import (
    WarpSawyerEnv,
    hamacher_product,
    long_tail_tolerance,
    quat_xyzw_from_matrix,
    sample_obj_goal,
)

PEG_LOW, PEG_HIGH = (0.0, 0.5, 0.02), (0.2, 0.7, 0.02)
BOX_LOW, BOX_HIGH = (-0.35, 0.4, -0.001), (-0.25, 0.7, 0.001)
HOLE = (0.03, 0.0, 0.13)  # goal = box + HOLE
MIN_PEG_BOX_XY = 0.1
TARGET_RADIUS = 0.07
HEAD_SCALE = (1.0, 2.0, 2.0)


def rect_prism_tolerance(curr: torch.Tensor, zero: torch.Tensor, one: torch.Tensor) -> torch.Tensor:
    """Meta-World's ``reward_utils.rect_prism_tolerance``: (B, 3) each -> (B,); 1 outside the prism spanned by
    the corners ``zero`` and ``one``, the product of the per-axis fractions from ``zero`` to ``one`` inside."""
    lo, hi = torch.minimum(zero, one), torch.maximum(zero, one)
    inside = ((curr >= lo) & (curr <= hi)).all(dim=-1)  # (B,)
    scale = ((curr - zero) / (one - zero)).prod(dim=-1)
    return torch.where(inside, scale, torch.ones_like(scale))


class WarpPegInsertSideEnv(WarpSawyerEnv):
    """Batched peg-insert-side-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    XML = "sawyer_xyz/sawyer_peg_insertion_side.xml"
    TASK = "peg-insert-side-v3"
    HAND_INIT_POS = (0.0, 0.6, 0.2)
    MOCAP_LOW, MOCAP_HIGH = (-0.5, 0.40, 0.05), (0.5, 1.0, 0.5)
    GOAL_LOW = tuple(b + h for b, h in zip(BOX_LOW, HOLE))  # goal_space: the box's range + HOLE
    GOAL_HIGH = tuple(b + h for b, h in zip(BOX_HIGH, HOLE))
    DEFAULT_MAX_STEPS = 400  # sim.tasks' peg-insert-side-v3 default
    ROOT_BODY = "box"
    OBJ_BODY = "peg"
    OBJ_QPOS = slice(9, 12)  # the peg's free joint: _set_obj_xyz writes its position, zeroes its velocity
    OBJ_QVEL = slice(9, 15)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        head = self._settled_hand_state().site_xpos[self.model.site("pegHead").id]  # the default peg's head
        self.peg_head_init = torch.tensor(head, dtype=torch.float32, device=self.device).expand(
            self.num_worlds, 3
        )

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> peg (n, 3) and goal (n, 3) (the box + HOLE), Meta-World's rejection rule included."""
        vec = sample_obj_goal(seeds, (*PEG_LOW, *BOX_LOW), (*PEG_HIGH, *BOX_HIGH), MIN_PEG_BOX_XY)
        return vec[:, :3], vec[:, 3:] + torch.tensor(HOLE, device=vec.device)

    def _place(self, idx: torch.Tensor, obj: torch.Tensor, goal: torch.Tensor, qpos: torch.Tensor) -> None:
        qpos[:, self.OBJ_QPOS] = obj
        self._place_root(idx, goal - torch.tensor(HOLE, device=goal.device))

    def _object_pos(self) -> torch.Tensor:
        return self.site_pos("pegGrasp")

    def _object_quat(self) -> torch.Tensor:
        return quat_xyzw_from_matrix(
            self._site_xmat[:, self._index(mujoco.mjtObj.mjOBJ_SITE, "site", "pegGrasp")]
        )

    def _in_place(self, head: torch.Tensor, head_to_target: torch.Tensor) -> torch.Tensor:
        """Peg head (B, 3) and its scaled distance to the hole (B,) -> in_place (B,): the scaled head-to-hole
        tolerance times the collision boxes' terms."""
        scale = torch.tensor(HEAD_SCALE, device=self.device)
        margin = ((self.peg_head_init - self.goal) * scale).norm(dim=-1)
        in_place = long_tail_tolerance(head_to_target, TARGET_RADIUS, margin)
        boxes = [
            rect_prism_tolerance(
                head,
                zero=self.site_pos(f"bottom_right_corner_collision_box_{k}"),
                one=self.site_pos(f"top_left_corner_collision_box_{k}"),
            )
            for k in (1, 2)
        ]
        return hamacher_product(in_place, hamacher_product(boxes[1], boxes[0]))

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        obj, tcp_opened = obs[:, 4:7], obs[:, 3]
        tcp_to_obj = (obj - self.tcp_center()).norm(dim=-1)  # (B,)
        head = self.site_pos("pegHead")  # (B, 3)
        obj_to_target = ((head - self.goal) * torch.tensor(HEAD_SCALE, device=self.device)).norm(dim=-1)
        in_place = self._in_place(head, obj_to_target)
        raised = (tcp_opened > 0) & (obj[:, 2] - 0.01 > self.obj_init_pos[:, 2])  # (B,)
        held = (tcp_to_obj < 0.08) & raised
        grasp = self._gripper_caging(action, obj, obj_radius=0.0075, pad_success_thresh=0.03)
        grasp = torch.where(held, torch.ones_like(grasp), grasp)
        reward = hamacher_product(grasp, in_place)
        reward = torch.where(held, reward + 1.0 + 5.0 * in_place, reward)
        success = obj_to_target <= 0.07
        reward = torch.where(success, torch.full_like(reward, 10.0), reward)
        terms = {
            "near_object": (tcp_to_obj <= 0.03).float(),
            "grasp_success": ((tcp_to_obj < 0.02) & raised).float(),
            "grasp_reward": grasp,
            "in_place_reward": in_place,
            "obj_to_target": obj_to_target,
            "unscaled_reward": reward,
        }
        return reward, success, terms
