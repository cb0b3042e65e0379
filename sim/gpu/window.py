"""window-open-v3 and window-close-v3 on MuJoCo Warp: Meta-World's window reset, reward and success in torch.

Ported from ``metaworld/envs/sawyer_window_open_v3.py`` and ``sawyer_window_close_v3.py`` (metaworld==3.1.1,
reward_function_version "v2"). Both use ``sawyer_window_horizontal.xml``: the frame body ``window`` is moved
per episode (a model position, kept per world here) and the pane slides along x on ``window_slide``
(qpos[9]); the hand starts at (0, 0.4, 0.2).

- window-open: frame uniform in (-0.1, 0.7, 0.16)..(0.1, 0.9, 0.16), pane closed (qpos[9] = 0), goal
  ``frame + (0.2, 0, 0)``; the object is site ``handleOpenStart``.
- window-close: frame uniform in (0, 0.75, 0.2)..(0, 0.9, 0.2), pane open (qpos[9] = 0.2), goal ``frame``;
  the object is site ``handleCloseStart``.

Both: ``in_place = tolerance(|obj_x - goal_x|, (0, 0.05), margin=|init_x - goal_x| - 0.05|, long_tail)``,
``reach = tolerance(||obj - tcp||, (0, 0.02), margin=|handle_init - init_tcp| - 0.02|)`` (long-tail for open,
gaussian for close), reward ``10 * hamacher(reach, in_place)``, success ``|obj_x - goal_x| <= 0.05``.

One deviation: Meta-World takes the handle's initial position (the reach margin) and the reset observation's
object before recomputing kinematics after it moves the frame, so both show where the *previous* episode's
window stood. Here they are the placed window's: ``handle_init`` is the handle at the start of the episode
(window-close: Meta-World's "closed handle + 0.2 in x", which is the same point).
"""

from __future__ import annotations

from typing import Any

import torch

from robosteer.sim.gpu.sawyer import (
    WarpSawyerEnv,
    gaussian_tolerance,
    hamacher_product,
    long_tail_tolerance,
    sample_box,
)

TARGET_RADIUS = 0.05
HANDLE_RADIUS = 0.02
HAND_LOW, HAND_HIGH = (-0.5, 0.40, 0.05), (0.5, 1.0, 0.5)


class _WarpWindowEnv(WarpSawyerEnv):
    """The sliding window both tasks share (placement, slide joint, the handle as object, reward)."""

    XML = "sawyer_xyz/sawyer_window_horizontal.xml"
    HAND_INIT_POS = (0.0, 0.4, 0.2)
    MOCAP_LOW, MOCAP_HIGH = HAND_LOW, HAND_HIGH
    GOAL_LOW, GOAL_HIGH = HAND_LOW, HAND_HIGH
    DEFAULT_MAX_STEPS = 200
    ROOT_BODY = "window"
    OBJ_QPOS = slice(9, 10)  # window_slide
    OBJ_QVEL = slice(9, 10)
    OBJ_LOW: tuple[float, float, float] = (0.0, 0.0, 0.0)
    OBJ_HIGH: tuple[float, float, float] = (0.0, 0.0, 0.0)
    GOAL_OFFSET = (0.0, 0.0, 0.0)
    HANDLE_SITE = ""
    reach_tolerance = staticmethod(long_tail_tolerance)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handle_init = torch.zeros(self.num_worlds, 3, device=self.device)  # (B, 3)

    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) seeds -> window frame position (n, 3) and goal (n, 3)."""
        frame = sample_box(seeds, self.OBJ_LOW, self.OBJ_HIGH)
        return frame, frame + torch.tensor(self.GOAL_OFFSET, device=frame.device)

    def _object_pos(self) -> torch.Tensor:
        return self.site_pos(self.HANDLE_SITE)

    def _object_quat(self) -> torch.Tensor:
        return torch.zeros(self.num_worlds, 4, device=self.device)

    def _start_episodes(self, mask: torch.Tensor) -> None:
        self.handle_init = torch.where(mask[:, None], self._object_pos(), self.handle_init)

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) obs, (B, 4) action -> reward (B,), success (B,), Meta-World's info terms (B,) each."""
        obj = self._object_pos()  # Meta-World reads the site again, not the clipped observation
        target_to_obj = (obj[:, 0] - self.goal[:, 0]).abs()  # (B,)
        init = self._in_place_start()[:, 0]
        in_place = long_tail_tolerance(
            target_to_obj, TARGET_RADIUS, ((init - self.goal[:, 0]).abs() - TARGET_RADIUS).abs()
        )
        tcp_to_obj = (obj - self.tcp_center()).norm(dim=-1)  # (B,)
        tcp_to_obj_init = (self.handle_init - self.init_tcp).norm(dim=-1)
        reach = self.reach_tolerance(tcp_to_obj, HANDLE_RADIUS, (tcp_to_obj_init - HANDLE_RADIUS).abs())
        reward = 10.0 * hamacher_product(reach, in_place)
        terms = {
            "near_object": (tcp_to_obj <= 0.05).float(),
            "grasp_success": torch.ones_like(reward),
            "grasp_reward": reach,
            "in_place_reward": in_place,
            "obj_to_target": target_to_obj,
            "unscaled_reward": reward,
        }
        return reward, target_to_obj <= TARGET_RADIUS, terms

    def _in_place_start(self) -> torch.Tensor:
        """(B, 3) the point whose x sets in_place's margin."""
        raise NotImplementedError


class WarpWindowOpenEnv(_WarpWindowEnv):
    """Batched window-open-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    TASK = "window-open-v3"
    OBJ_LOW, OBJ_HIGH = (-0.1, 0.7, 0.16), (0.1, 0.9, 0.16)
    GOAL_OFFSET = (0.2, 0.0, 0.0)
    HANDLE_SITE = "handleOpenStart"
    JOINT_INIT = 0.0

    def _in_place_start(self) -> torch.Tensor:
        return self.obj_init_pos  # the frame's position (Meta-World's obj_init_pos)


class WarpWindowCloseEnv(_WarpWindowEnv):
    """Batched window-close-v3 (``num_worlds`` worlds on ``device``); protocol in ``sim.gpu.sawyer``."""

    TASK = "window-close-v3"
    OBJ_LOW, OBJ_HIGH = (0.0, 0.75, 0.2), (0.0, 0.9, 0.2)
    HANDLE_SITE = "handleCloseStart"
    JOINT_INIT = 0.2  # the pane starts open
    reach_tolerance = staticmethod(gaussian_tolerance)

    def _in_place_start(self) -> torch.Tensor:
        return self.handle_init
