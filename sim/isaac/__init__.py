"""Isaac Lab / Isaac Gym backends of the batched-env protocol (optional, import-guarded).

Importing this package never imports Isaac: only ``make_isaac_env`` (and the ``make_*`` factories) do,
and they raise ``IsaacNotInstalledError`` with install steps when Isaac is missing. The adapters
themselves (``IsaacLabEnv``, ``IsaacGymEnv``) wrap an already-built env object, so their protocol logic
is tested here against small torch fakes of the documented Isaac APIs; they are untested on real Isaac.
"""

from __future__ import annotations

from typing import Any

from robosteer.sim.errors import check_choice
from robosteer.sim.isaac.install import ISAAC_SIMS, IsaacNotInstalledError, available
from robosteer.sim.isaac.isaacgym_env import IsaacGymEnv, make_isaacgym_env
from robosteer.sim.isaac.lab import IsaacLabEnv, make_isaaclab_env
from robosteer.sim.lockstep import SimStep, TorchBatchedEnv


def make_isaac_env(
    task: str, sim: str = "isaaclab", num_envs: int = 1, seed: int = 0, **kwargs: Any
) -> TorchBatchedEnv:
    """Build an Isaac task as a batched env: ``sim="isaaclab"`` takes a gym id ("Isaac-Lift-Cube-Franka-v0"),
    ``sim="isaacgym"`` an IsaacGymEnvs task name ("FrankaCabinet"); ``kwargs`` go to the factory
    (device / sim_device, headless) and the adapter (action_chunk, obs_history, output, success_*).
    """
    check_choice("Isaac sim", sim, ISAAC_SIMS)
    if sim == "isaaclab":
        return make_isaaclab_env(task, num_envs=num_envs, seed=seed, **kwargs)
    return make_isaacgym_env(task, num_envs=num_envs, seed=seed, **kwargs)


__all__ = [
    "ISAAC_SIMS",
    "IsaacGymEnv",
    "IsaacLabEnv",
    "IsaacNotInstalledError",
    "SimStep",
    "TorchBatchedEnv",
    "available",
    "make_isaac_env",
    "make_isaacgym_env",
    "make_isaaclab_env",
]
