"""robosteer's simulation side: the Meta-World task registry, batched envs, rendering, experts, evaluation.

``MUJOCO_GL`` defaults to ``egl`` (headless rendering) and must be set before mujoco is first imported,
so import ``sim`` before ``mujoco``/``metaworld`` or export ``MUJOCO_GL=egl`` yourself.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from robosteer.sim.batched import BatchedEnv, make_env
from robosteer.sim.chunking import ActionChunkWrapper
from robosteer.sim.errors import InvalidChoiceError, TaskNotFoundError
from robosteer.sim.evaluate import evaluate, wilson_interval
from robosteer.sim.experts import ScriptedExpert
from robosteer.sim.metaworld_env import MetaWorldEnv, episode_seed, obs_mode_for_keys
from robosteer.sim.randomization import RandomizationConfig
from robosteer.sim.render import CameraRenderer
from robosteer.sim.tasks import TaskSpec, get_task, list_tasks
from robosteer.sim.video import write_video

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
