"""GPU-batched backends (MuJoCo Warp) behind the batched-env protocol; an optional environment.

Needs ``.venv-gpu`` (``make gpu-env``: mujoco-warp, warp-lang, a newer mujoco than Meta-World's pin), so
``import sim`` never imports this package. Tasks ported so far: reach-v3 (``WarpReachEnv``), push-v3
(``WarpPushEnv``), pick-place-v3 (``WarpPickPlaceEnv``).
"""

from __future__ import annotations

from robosteer.sim.gpu.pick_place import WarpPickPlaceEnv
from robosteer.sim.gpu.push import WarpPushEnv
from robosteer.sim.gpu.reach import WarpReachEnv
from robosteer.sim.gpu.sawyer import WarpSawyerEnv

__all__ = ["WarpPickPlaceEnv", "WarpPushEnv", "WarpReachEnv", "WarpSawyerEnv"]
