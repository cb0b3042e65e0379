"""robosteer's simulation side: the Meta-World task registry, batched envs, rendering, experts, evaluation.

``MUJOCO_GL`` defaults to ``egl`` (headless rendering) and must be set before mujoco is first imported,
so import ``sim`` before ``mujoco``/``metaworld`` or export ``MUJOCO_GL=egl`` yourself.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from sim.batched import BatchedEnv, make_env
from sim.chunking import ActionChunkWrapper
from sim.errors import InvalidChoiceError, TaskNotFoundError
from sim.evaluate import evaluate, wilson_interval
from sim.experts import ScriptedExpert
from sim.metaworld_env import MetaWorldEnv, episode_seed
from sim.randomization import RandomizationConfig
from sim.render import CameraRenderer
from sim.tasks import TaskSpec, get_task, list_tasks
from sim.video import write_video

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
    "wilson_interval",
    "write_video",
]
