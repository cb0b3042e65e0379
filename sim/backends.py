"""Which simulator steps the env: the one ``sim=`` choice of ``make_env`` and the commands.

- ``metaworld``: Meta-World v3 on CPU MuJoCo (mujoco==3.3.0), every task, state and pixels (the default).
- ``warp``: the MuJoCo Warp ports in ``sim/gpu`` (``WARP_TASKS``; state only), thousands of worlds
  stepped together on ``device`` (``cuda``, or warp's CPU device). MuJoCo Warp needs mujoco 4.0 while
  Meta-World pins 3.3.0, so it lives in its own environment, ``.venv-gpu`` (``make gpu-env``).
- ``isaaclab``: an Isaac Lab task id through ``sim/isaac`` (needs Isaac Lab and an NVIDIA GPU).
- ``isaacgym``: Python only (``make_env(sim="isaacgym")``), never a command's choice: Isaac Gym's official
  bindings load only in Python 3.6-3.8 and robosteer needs 3.11, and NVIDIA retired it for Isaac Lab.

Checks run before anything is imported, so a bad choice is one line naming the choices.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from robosteer.sim.errors import InvalidChoiceError, check_choice

SIMS = ("metaworld", "warp", "isaaclab", "isaacgym")  # make_env's choices
COMMAND_SIMS = ("metaworld", "warp", "isaaclab")  # the commands' sim= choices (isaacgym: see above)
WARP_TASKS = {  # Meta-World task -> its MuJoCo Warp port (sim/gpu)
    "reach-v3": "WarpReachEnv",
    "push-v3": "WarpPushEnv",
    "pick-place-v3": "WarpPickPlaceEnv",
    "door-open-v3": "WarpDoorOpenEnv",
    "drawer-open-v3": "WarpDrawerOpenEnv",
    "drawer-close-v3": "WarpDrawerCloseEnv",
    "button-press-topdown-v3": "WarpButtonPressTopdownEnv",
    "window-open-v3": "WarpWindowOpenEnv",
    "window-close-v3": "WarpWindowCloseEnv",
    "peg-insert-side-v3": "WarpPegInsertSideEnv",
}
WARP_DEVICES = ("cpu", "cuda")


class SimNotInstalledError(ImportError):
    """A simulator was asked for whose packages this environment lacks; the message says where it lives."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


def check_warp(task: str, device: str) -> None:
    """``sim=warp``'s task and device, and its packages: one line each, before any import."""
    if task not in WARP_TASKS:
        raise InvalidChoiceError("task for sim='warp' (ported to MuJoCo Warp)", task, WARP_TASKS)
    kind = check_choice("device for sim='warp'", str(device).split(":")[0], WARP_DEVICES)
    if importlib.util.find_spec("mujoco_warp") is None:
        raise SimNotInstalledError(
            "sim='warp' needs MuJoCo Warp (mujoco-warp==4.0.0, mujoco 4.0), which this environment lacks: it "
            "lives in .venv-gpu (`make gpu-env`; Meta-World pins mujoco==3.3.0 here). Nearest valid choice: "
            "sim='metaworld'"
        )
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InvalidChoiceError("device for sim='warp' on this machine (no CUDA GPU)", device, ["cpu"])


def make_warp_env(
    task: str, num_envs: int, seed: int, device: str = "cpu", **kwargs: Any
) -> Any:  # sim.gpu.WarpSawyerEnv
    """A MuJoCo Warp port of ``task`` with ``num_envs`` worlds on ``device``; ``kwargs`` go to
    ``WarpSawyerEnv`` (max_episode_steps, terminate_on_success, reward, action_chunk, obs_history, output)."""
    check_warp(task, device)
    from robosteer.sim import gpu

    env_class = getattr(gpu, WARP_TASKS[task])
    return env_class(num_worlds=num_envs, seed=seed, device=device, **kwargs)
