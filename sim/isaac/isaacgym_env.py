"""Isaac Gym (Preview 4) VecTask envs behind robosteer's batched-env protocol.

Type-checked with mypy against ``isaacgym-stubs`` (``make test``): ``VecTaskLike`` is the VecTask surface
of IsaacGymEnvs that the adapter uses, with the simulator handles typed by ``isaacgym.gymapi``.

VecTask conventions differ from the protocol in two ways this adapter bridges:
- ``step(actions) -> ({"obs": (N, D)}, rew, reset_buf, extras)`` and finished envs are reset only at the
  start of the *next* step (in ``pre_physics_step``), so the returned obs of a finished env is its
  terminal obs. The adapter keeps it as ``final_obs``, resets those envs at once with the task's
  ``reset_idx(env_ids)`` and reads their first obs with ``compute_observations()``. That first obs is
  exact for tasks whose observations are computed from the DOF/root-state tensors ``reset_idx`` writes
  in place; quantities PhysX only updates in ``simulate`` (rigid-body poses, contacts) still show the
  pre-reset state until the next step.
- time-outs are ``extras["time_outs"]`` inside ``reset_buf``: they come back as ``truncated``.
Success: ``success_fn(task) -> (N,) bool`` or a per-env (N,) entry ``extras[success_key]``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch

from robosteer.sim.isaac.install import require
from robosteer.sim.lockstep import SimStep, TorchBatchedEnv

if TYPE_CHECKING:
    from isaacgym import gymapi


@runtime_checkable
class VecTaskLike(Protocol):
    """The VecTask attributes and methods (IsaacGymEnvs ``tasks/base/vec_task.py``) the adapter uses."""

    gym: gymapi.Gym
    sim: gymapi.Sim
    viewer: gymapi.Viewer | None
    num_envs: int
    num_obs: int
    num_actions: int
    rl_device: str
    obs_buf: torch.Tensor  # (N, D)
    reset_buf: torch.Tensor  # (N,)
    progress_buf: torch.Tensor  # (N,)
    max_episode_length: int
    extras: dict[str, Any]

    def step(
        self, actions: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, dict[str, Any]]: ...

    def reset_idx(self, env_ids: torch.Tensor) -> None: ...

    def compute_observations(self) -> Any: ...


VEC_TASK_MEMBERS = (
    *("gym", "sim", "viewer", "num_envs", "num_obs", "num_actions", "rl_device", "obs_buf", "reset_buf"),
    *("progress_buf", "max_episode_length", "extras", "step", "reset_idx", "compute_observations"),
)


class IsaacGymEnv(TorchBatchedEnv):
    """An Isaac Gym VecTask (``isaacgymenvs.make(...)`` or your own) as a robosteer batched env."""

    def __init__(
        self,
        task: VecTaskLike,
        name: str | None = None,
        action_chunk: int | None = None,
        obs_history: int | None = None,
        success_key: str = "successes",
        success_fn: Callable[[Any], torch.Tensor] | None = None,
        idle_action: Sequence[float] | None = None,
        output: str = "torch",
    ) -> None:
        if not isinstance(task, VecTaskLike):
            missing = [n for n in VEC_TASK_MEMBERS if not hasattr(task, n)]
            raise TypeError(
                f"{type(task).__name__} is not an Isaac Gym VecTask: it lacks {missing} "
                "(see VecTask in IsaacGymEnvs' tasks/base/vec_task.py)"
            )
        self._task = task
        self._success_key = success_key
        self._success_fn = success_fn
        super().__init__(
            task=name or type(task).__name__,
            num_envs=task.num_envs,
            obs_dim=task.num_obs,
            action_dim=task.num_actions,
            device=task.rl_device,
            action_chunk=action_chunk,
            obs_history=obs_history,
            idle_action=idle_action,
            output=output,
            max_episode_steps=int(task.max_episode_length),
        )

    def _obs(self) -> torch.Tensor:
        return self._task.obs_buf.to(self.device, torch.float32)  # (N, D)

    def _success(self, extras: dict[str, Any]) -> torch.Tensor:
        if self._success_fn is not None:
            return self._success_fn(self._task).to(self.device, torch.bool)
        value = extras.get(self._success_key)
        if isinstance(value, torch.Tensor) and value.shape == (self.num_envs,):
            return value.to(self.device).bool()
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _reset_envs(self, env_ids: torch.Tensor) -> None:
        """Reset ``env_ids`` now (VecTask would do it at the next step) and refresh their obs."""
        self._task.reset_idx(env_ids)
        self._task.compute_observations()

    def _sim_reset(self, seed: int | None) -> torch.Tensor:
        if seed is not None:  # what isaacgymenvs.utils.reproducibility.set_seed does
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
        self._reset_envs(torch.arange(self.num_envs, device=self._task.reset_buf.device))
        return self._obs()

    def _sim_step(self, action: torch.Tensor) -> SimStep:
        obs_dict, reward, reset_buf, extras = self._task.step(action)
        terminal = obs_dict["obs"].to(self.device, torch.float32)  # (N, D) terminal obs where done
        done = reset_buf.to(self.device).bool()
        time_outs = extras.get("time_outs")
        truncated = done & (
            time_outs.to(self.device).bool()
            if isinstance(time_outs, torch.Tensor)
            else torch.zeros_like(done)
        )
        success = self._success(extras)
        ids = torch.nonzero(done).flatten()
        obs = terminal
        if len(ids):
            self._reset_envs(ids.to(self._task.reset_buf.device))
            obs = torch.where(done[:, None], self._obs(), terminal)
        return SimStep(
            obs=obs,
            reward=reward.to(self.device, torch.float32),
            terminated=done & ~truncated,
            truncated=truncated,
            final_obs=terminal,
            success=success,
        )

    def _sim_close(self) -> None:
        gym = self._task.gym
        if self._task.viewer is not None:
            gym.destroy_viewer(self._task.viewer)
        gym.destroy_sim(self._task.sim)


def make_isaacgym_env(
    task: str,
    num_envs: int = 1,
    seed: int = 0,
    sim_device: str = "cuda:0",
    rl_device: str = "cuda:0",
    headless: bool = True,
    **kwargs: Any,
) -> IsaacGymEnv:
    """Build the IsaacGymEnvs task ``task`` (e.g. "FrankaCabinet") and wrap it.

    ``kwargs`` go to ``IsaacGymEnv`` (action_chunk, obs_history, success_key, success_fn, output, ...).
    """
    modules = require("isaacgym")
    vec_task = modules["isaacgymenvs"].make(
        seed=int(seed),
        task=task,
        num_envs=int(num_envs),
        sim_device=sim_device,
        rl_device=rl_device,
        graphics_device_id=-1 if headless else 0,
        headless=headless,
    )
    return IsaacGymEnv(vec_task, name=task, **kwargs)
