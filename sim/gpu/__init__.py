"""GPU-batched backends (MuJoCo Warp) behind the batched-env protocol; an optional environment.

Needs ``.venv-gpu`` (``make gpu-env``: mujoco-warp, warp-lang, a newer mujoco than Meta-World's pin), so
``import sim`` never imports this package. Tasks ported so far (``sim.backends.WARP_TASKS``): reach-v3,
push-v3, pick-place-v3, door-open-v3, drawer-open-v3, drawer-close-v3, button-press-topdown-v3, window-open-v3,
window-close-v3, peg-insert-side-v3: the ten of MT10.
"""

from __future__ import annotations

from robosteer.sim.gpu.button import WarpButtonPressTopdownEnv
from robosteer.sim.gpu.door import WarpDoorOpenEnv
from robosteer.sim.gpu.drawer import WarpDrawerCloseEnv, WarpDrawerOpenEnv
from robosteer.sim.gpu.peg_insert import WarpPegInsertSideEnv
from robosteer.sim.gpu.pick_place import WarpPickPlaceEnv
from robosteer.sim.gpu.push import WarpPushEnv
from robosteer.sim.gpu.reach import WarpReachEnv
from robosteer.sim.gpu.sawyer import WarpSawyerEnv
from robosteer.sim.gpu.window import WarpWindowCloseEnv, WarpWindowOpenEnv

__all__ = [
    "WarpButtonPressTopdownEnv",
    "WarpDoorOpenEnv",
    "WarpDrawerCloseEnv",
    "WarpDrawerOpenEnv",
    "WarpPegInsertSideEnv",
    "WarpPickPlaceEnv",
    "WarpPushEnv",
    "WarpReachEnv",
    "WarpSawyerEnv",
    "WarpWindowCloseEnv",
    "WarpWindowOpenEnv",
]
