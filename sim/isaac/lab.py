"""Isaac Lab tasks (``ManagerBasedRLEnv`` / ``DirectRLEnv``) behind robosteer's batched-env protocol.

Isaac Lab is not installable here, so this module is type-checked against ``IsaacLabRLEnv``, a Protocol
that writes down the documented env API it relies on (``isaaclab.envs.ManagerBasedRLEnv``):
``reset(seed) -> (obs, extras)`` and ``step(action) -> (obs, reward, terminated, time_outs, extras)``
with obs a dict of groups (the policy's is ``"policy"``, (N, D)), ``num_envs``, ``device``, and
auto-reset inside ``step`` through ``_reset_idx(env_ids)``.

Isaac Lab computes the observation after resetting the finished envs, so the terminal observation is
gone by the time ``step`` returns. The adapter wraps the env's ``_reset_idx`` so that, just before the
reset, it records the policy group's terminal observation (``observation_manager.compute_group``, or
``_get_observations()`` for direct envs) and the success signal; that becomes ``info["final_obs"]``.
Success: the termination term named ``success_term`` (e.g. the stack task's "success") or
``success_fn(env) -> (N,) bool``; Lift-style tasks that have neither report no success (a warning says so).
Time-outs are Isaac Lab's ``time_outs`` and come back as ``truncated``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import torch

from robosteer.sim.isaac.install import require
from robosteer.sim.lockstep import SimStep, TorchBatchedEnv


class ObservationManagerAPI(Protocol):
    def compute_group(self, group_name: str) -> torch.Tensor | dict[str, torch.Tensor]: ...


class TerminationManagerAPI(Protocol):
    @property
    def active_terms(self) -> list[str]: ...

    def get_term(self, name: str) -> torch.Tensor: ...


@runtime_checkable
class IsaacLabRLEnv(Protocol):
    """The part of Isaac Lab's documented RL env API (ManagerBasedRLEnv / DirectRLEnv) the adapter uses."""

    num_envs: int
    device: str | torch.device
    single_action_space: gym.spaces.Space

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def step(
        self, action: torch.Tensor
    ) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]: ...

    def _reset_idx(self, env_ids: Sequence[int] | torch.Tensor) -> None: ...

    def close(self) -> None: ...


SuccessFn = Callable[[Any], torch.Tensor]


class IsaacLabEnv(TorchBatchedEnv):
    """An Isaac Lab env (made with ``gym.make(task_id, cfg=...)``) as a robosteer batched env."""

    def __init__(
        self,
        env: Any,
        task: str | None = None,
        action_chunk: int | None = None,
        obs_history: int | None = None,
        obs_group: str = "policy",
        success_term: str | None = "success",
        success_fn: SuccessFn | None = None,
        idle_action: Sequence[float] | None = None,
        output: str = "torch",
    ) -> None:
        base = getattr(env, "unwrapped", env)
        if not isinstance(base, IsaacLabRLEnv):
            members = ("num_envs", "device", "single_action_space", "reset", "step", "_reset_idx", "close")
            missing = [n for n in members if not hasattr(base, n)]
            raise TypeError(
                f"{type(base).__name__} is not an Isaac Lab RL env: it lacks {missing} "
                "(see isaaclab.envs.ManagerBasedRLEnv / DirectRLEnv)"
            )
        self._env: IsaacLabRLEnv = base
        self._obs_group = obs_group
        self._success_fn = success_fn
        self._success_term = None
        manager: TerminationManagerAPI | None = getattr(base, "termination_manager", None)
        if success_fn is None and manager is not None and success_term in manager.active_terms:
            self._success_term = success_term
        if success_fn is None and self._success_term is None:
            terms = list(manager.active_terms) if manager is not None else []
            warnings.warn(
                f"Isaac Lab task {task!r} has no success signal: no termination term {success_term!r} "
                f"(terms: {terms}) and no success_fn; info['success'] stays False",
                stacklevel=2,
            )
        self.success_source = self._success_term or ("success_fn" if success_fn else None)
        obs_space = getattr(base, "single_observation_space", None)
        group_space = obs_space[obs_group] if isinstance(obs_space, gym.spaces.Dict) else None
        if group_space is None or group_space.shape is None or len(group_space.shape) != 1:
            raise ValueError(
                f"Isaac Lab observation group {obs_group!r} is not valid: expected a concatenated (D,) Box in "
                f"single_observation_space, got {group_space!r} (set concatenate_terms=True in its ObsGroup cfg)"
            )
        act_shape = base.single_action_space.shape
        if act_shape is None or len(act_shape) != 1:
            raise ValueError(f"Isaac Lab action space of shape {act_shape} is not valid: expected (A,)")
        max_len = getattr(base, "max_episode_length", None)
        super().__init__(
            task=task or getattr(getattr(base, "spec", None), "id", None) or type(base).__name__,
            num_envs=base.num_envs,
            obs_dim=group_space.shape[0],
            action_dim=act_shape[0],
            device=base.device,
            action_chunk=action_chunk,
            obs_history=obs_history,
            idle_action=idle_action,
            output=output,
            max_episode_steps=None if max_len is None else int(max_len),
        )
        self._captured_obs: torch.Tensor | None = None  # (N, D) terminal obs of envs reset in this step
        self._captured_success: torch.Tensor | None = None  # (N,) bool
        self._original_reset_idx = base._reset_idx
        base._reset_idx = self._reset_idx_hook  # type: ignore[method-assign]

    # ----------------------------------------------------------------- capture before auto-reset
    def _group_obs(self) -> torch.Tensor:
        """The policy group's observation of the current sim state (N, D), without stepping."""
        manager: ObservationManagerAPI | None = getattr(self._env, "observation_manager", None)
        if manager is not None:
            obs = manager.compute_group(self._obs_group)
        else:  # DirectRLEnv
            obs = self._env._get_observations()[self._obs_group]  # type: ignore[attr-defined]
        if not isinstance(obs, torch.Tensor):
            raise ValueError(f"observation group {self._obs_group!r} is a dict: expected concatenated terms")
        return obs

    def _success_now(self) -> torch.Tensor:
        if self._success_fn is not None:
            return self._success_fn(self._env).to(self.device, torch.bool)
        if self._success_term is not None:
            manager: TerminationManagerAPI = self._env.termination_manager  # type: ignore[attr-defined]
            return manager.get_term(self._success_term).to(self.device, torch.bool)
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def _reset_idx_hook(self, env_ids: Sequence[int] | torch.Tensor) -> None:
        """Record terminal obs and success of ``env_ids`` (inside ``step``), then run Isaac Lab's reset."""
        if self._captured_obs is not None:  # armed by _sim_step
            ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.device)
            self._captured_obs[ids] = self._group_obs()[ids].to(torch.float32)
            self._captured_success[ids] = self._success_now()[ids]  # type: ignore[index]
        self._original_reset_idx(env_ids)

    # ----------------------------------------------------------------- backend hooks
    def _policy_obs(self, obs: Mapping[str, Any]) -> torch.Tensor:
        if self._obs_group not in obs:
            raise KeyError(f"Isaac Lab obs has no group {self._obs_group!r}: expected one of {sorted(obs)}")
        return obs[self._obs_group]

    def _sim_reset(self, seed: int | None) -> torch.Tensor:
        obs, _ = self._env.reset(seed=seed)
        return self._policy_obs(obs)

    def _sim_step(self, action: torch.Tensor) -> SimStep:
        n = self.num_envs
        self._captured_obs = torch.zeros(n, self.obs_dim, device=self.device)
        self._captured_success = torch.zeros(n, dtype=torch.bool, device=self.device)
        try:
            obs_dict, reward, terminated, truncated, _ = self._env.step(action)
            reset_success = self._captured_success
            captured = self._captured_obs
        finally:
            self._captured_obs = self._captured_success = None
        obs = self._policy_obs(obs_dict).to(torch.float32)  # (N, D)
        terminated = terminated.to(self.device, torch.bool)
        truncated = truncated.to(self.device, torch.bool)
        done = (terminated | truncated)[:, None]
        running_success = self._success_now()  # envs that did not reset: the state after this step
        return SimStep(
            obs=obs,
            reward=reward.to(self.device, torch.float32),
            terminated=terminated,
            truncated=truncated,
            final_obs=torch.where(done, captured, obs),
            success=torch.where(done[:, 0], reset_success, running_success),
        )

    def _sim_close(self) -> None:
        self._env._reset_idx = self._original_reset_idx  # type: ignore[method-assign]
        self._env.close()


_APP: Any = None  # the process's Isaac Sim app (isaaclab.app.AppLauncher), started by the first env


def make_isaaclab_env(
    task: str,
    num_envs: int = 1,
    seed: int = 0,
    device: str = "cuda:0",
    headless: bool = True,
    **kwargs: Any,
) -> IsaacLabEnv:
    """Launch Isaac Sim (headless), build the registered Isaac Lab task ``task`` and wrap it.

    ``kwargs`` go to ``IsaacLabEnv`` (action_chunk, obs_history, success_term, success_fn, output, ...).
    """
    global _APP
    require("isaaclab")
    from isaaclab.app import AppLauncher

    # The simulation app must exist before isaaclab_tasks (and so the task registry) is imported, and Isaac Sim
    # starts once per process: a second env (robosteer-steer's evaluation env, a probe) reuses it.
    if _APP is None:
        _APP = AppLauncher(headless=headless, device=device)
    import isaaclab_tasks  # noqa: F401  (registers the gym ids)
    from isaaclab_tasks.utils import parse_env_cfg

    if task not in gym.registry:
        from robosteer.sim.errors import check_choice

        check_choice("Isaac Lab task", task, [k for k in gym.registry if k.startswith("Isaac-")])
    cfg = parse_env_cfg(task, device=device, num_envs=int(num_envs))
    cfg.seed = int(seed)
    return IsaacLabEnv(gym.make(task, cfg=cfg), task=task, **kwargs)
