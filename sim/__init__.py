"""robosteer's simulation side: the Meta-World task registry, batched envs, rendering, experts, evaluation.

``MUJOCO_GL`` defaults to ``egl`` (headless rendering) and must be set before mujoco is first imported,
so import ``sim`` before ``mujoco``/``metaworld`` or export ``MUJOCO_GL=egl`` yourself.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

# name -> the module that defines it, imported on first use (PEP 562): importing ``robosteer.sim`` (or a
# simulator-free part of it, as a real arm's steering does) does not load MuJoCo or Meta-World.
_LAZY = {
    "ActionChunkWrapper": "robosteer.sim.chunking",
    "BatchedEnv": "robosteer.sim.batched",
    "CameraRenderer": "robosteer.sim.render",
    "InvalidChoiceError": "robosteer.sim.errors",
    "MetaWorldEnv": "robosteer.sim.metaworld_env",
    "RandomizationConfig": "robosteer.sim.randomization",
    "ScriptedExpert": "robosteer.sim.experts",
    "TaskNotFoundError": "robosteer.sim.errors",
    "TaskSpec": "robosteer.sim.tasks",
    "episode_seed": "robosteer.sim.metaworld_env",
    "evaluate": "robosteer.sim.evaluate",
    "get_task": "robosteer.sim.tasks",
    "list_tasks": "robosteer.sim.tasks",
    "make_env": "robosteer.sim.batched",
    "obs_mode_for_keys": "robosteer.sim.obs_modes",
    "wilson_interval": "robosteer.sim.stats",
    "write_video": "robosteer.sim.video",
}

if TYPE_CHECKING:
    from robosteer.sim.batched import BatchedEnv, make_env
    from robosteer.sim.chunking import ActionChunkWrapper
    from robosteer.sim.errors import InvalidChoiceError, TaskNotFoundError
    from robosteer.sim.evaluate import evaluate
    from robosteer.sim.experts import ScriptedExpert
    from robosteer.sim.metaworld_env import MetaWorldEnv, episode_seed
    from robosteer.sim.obs_modes import obs_mode_for_keys
    from robosteer.sim.randomization import RandomizationConfig
    from robosteer.sim.render import CameraRenderer
    from robosteer.sim.stats import wilson_interval
    from robosteer.sim.tasks import TaskSpec, get_task, list_tasks
    from robosteer.sim.video import write_video


class _Package(types.ModuleType):
    """Keeps a lazy name that is also a submodule's name (``evaluate``: the function, in ``sim/evaluate.py``)
    bound to what ``_LAZY`` names: importing the submodule would otherwise rebind it to the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return  # the submodule stays reachable as sys.modules[f"robosteer.sim.{name}"]
        super().__setattr__(name, value)


_SHADOWED = {"evaluate"}  # lazy names that are also submodules' names
sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'robosteer.sim' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "ActionChunkWrapper",
    "BatchedEnv",
    "CameraRenderer",
    "InvalidChoiceError",
    "MetaWorldEnv",
    "RandomizationConfig",
    "ScriptedExpert",
    "TaskNotFoundError",
    "TaskSpec",
    "episode_seed",
    "evaluate",
    "get_task",
    "list_tasks",
    "make_env",
    "obs_mode_for_keys",
    "wilson_interval",
    "write_video",
]
