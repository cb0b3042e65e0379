"""Re-export of the lockstep torch protocol (``sim.lockstep``) under its original Isaac path.

``TorchBatchedEnv`` is shared with the MuJoCo Warp backend (``sim.gpu``), so it lives in the neutral
``sim.lockstep``; this module keeps ``from robosteer.sim.isaac.base import ...`` working.
"""

from __future__ import annotations

from robosteer.sim.lockstep import OUTPUTS, SimStep, TorchBatchedEnv, to_numpy

__all__ = ["OUTPUTS", "SimStep", "TorchBatchedEnv", "to_numpy"]
