"""The batched-env protocol for torch simulators that step every env in lockstep (Isaac Lab, Isaac Gym,
MuJoCo Warp).

Neutral module: it imports only torch, numpy, gymnasium and ``sim.errors``, so every backend's environment
can import it (``.venv-gpu`` too, where Meta-World's env code is unusable).

``BatchedEnv`` gets chunking, observation history and per-episode bookkeeping from wrappers around each
single gymnasium env. A GPU simulator has no single envs: all ``num_envs`` advance together in one call,
so the same semantics are implemented here once over (B, ...) tensors, and a backend only supplies
``_sim_reset(seed) -> (B, D)`` and ``_sim_step(action (B, A)) -> SimStep``.

Info layout after ``step`` (tensors on ``device``, or numpy arrays with ``output="numpy"``), as
``sim.batched`` documents it: ``success``, ``episode_return``, ``episode_length`` describe the step just
taken (the finished episode for envs that ended in it); ``final_obs`` holds the true next observation
(the terminal one where ``_final_obs``); ``final_info``/``_final_info`` appear when some env finished;
the backend's ``SimStep.terms`` (e.g. Meta-World's reward terms) are passed through, with a chunk their
value at the last step of its episode; with ``action_chunk`` also ``step_success`` (B, Ta) and
``steps_executed`` (B,). ``episode_seed`` (B,) is the seed of each env's episode now (after any
auto-reset), ``final_info["episode_seed"]`` that of the episode the step was taken in. Both are -1 for
simulators that draw every env's initial state from one RNG seeded at ``reset(seed)`` (Isaac: an episode
has no seed of its own; a run is still reproducible for a given seed and ``num_envs``); a backend with
per-episode seeds (MuJoCo Warp) overrides ``_sim_reset_envs``, ``_sim_episode_seeds`` and
``queue_episode_seeds``.

Chunks in lockstep: an env whose episode ends at chunk step t < Ta - 1 cannot pause while the others
finish the chunk. It auto-resets at once and is stepped with ``idle_action`` (zeros) for the rest of the
chunk; those idle steps belong to its new episode (they count in its ``episode_length`` and return) and
the returned obs is that episode's current one. The chunk's reward, ``success`` and ``steps_executed``
cover only the steps of the episode the chunk was chosen for. When every env has ended, the chunk stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robosteer.sim.errors import check_choice

OUTPUTS = ("torch", "numpy")


@dataclass
class SimStep:
    """One lockstep simulator step, every field (B, ...) on the env's device."""

    obs: torch.Tensor  # (B, D) after auto-reset: the new episode's first obs for envs that finished
    reward: torch.Tensor  # (B,) float32
    terminated: torch.Tensor  # (B,) bool, task termination (success or failure), not time-outs
    truncated: torch.Tensor  # (B,) bool, time limit reached
    final_obs: torch.Tensor  # (B, D) the true next obs: terminal obs where done, else == obs
    success: torch.Tensor  # (B,) bool, the task's success at this step (before any reset)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)  # (B, ...) extra info (reward terms)


def to_numpy(value: Any) -> Any:
    """Tensors (nested in dicts, tuples, lists) -> host numpy arrays; everything else unchanged."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return type(value)(to_numpy(v) for v in value)
    return value


class TorchBatchedEnv:
    """Protocol logic shared by the lockstep torch backends; subclasses implement ``_sim_reset``/``_sim_step``."""

    def __init__(
        self,
        task: str,
        num_envs: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str,
        action_chunk: int | None = None,
        obs_history: int | None = None,
        action_low: float = -1.0,
        action_high: float = 1.0,
        idle_action: Sequence[float] | None = None,
        output: str = "torch",
        max_episode_steps: int | None = None,
    ) -> None:
        for name, value in (("action_chunk", action_chunk), ("obs_history", obs_history)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} is not valid: expected an int >= 1 (e.g. 8) or None")
        self.output = check_choice("output", output, OUTPUTS)
        self.task = task
        self.num_envs = int(num_envs)
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.device = torch.device(device)
        self.action_chunk = action_chunk
        self.obs_history = obs_history
        self.max_episode_steps = max_episode_steps
        self.randomization = None  # sim.evaluate reads it; Isaac randomizes through its own event terms
        idle = torch.zeros(self.action_dim) if idle_action is None else torch.as_tensor(idle_action)
        if idle.shape != (self.action_dim,):
            raise ValueError(
                f"idle_action of shape {tuple(idle.shape)} is not valid: expected ({self.action_dim},)"
            )
        self.idle_action = idle.to(self.device, torch.float32)  # (A,)
        obs_shape = (self.obs_dim,) if obs_history is None else (obs_history, self.obs_dim)
        self.single_observation_space = gym.spaces.Dict(
            {"state": gym.spaces.Box(-np.inf, np.inf, obs_shape, dtype=np.float32)}
        )
        act_shape = (self.action_dim,) if action_chunk is None else (action_chunk, self.action_dim)
        self.single_action_space = gym.spaces.Box(action_low, action_high, act_shape, dtype=np.float32)
        self.obs_keys = ["state"]
        b = self.num_envs
        self.episode_seeds = np.full(b, -1, dtype=np.int64)  # (B,) no per-episode seeds (module docstring)
        self._ep_return = torch.zeros(b, device=self.device)  # (B,) running episode return
        self._ep_length = torch.zeros(b, dtype=torch.long, device=self.device)  # (B,)
        self._window: torch.Tensor | None = None  # (B, To, D) with obs_history
        self._needs_reset = True
        self._closed = False

    # ----------------------------------------------------------------- backend hooks
    def _sim_reset(self, seed: int | None) -> torch.Tensor:
        """Reset every env (seeding the simulator when ``seed`` is given); return obs (B, D)."""
        raise NotImplementedError

    def _sim_step(self, action: torch.Tensor) -> SimStep:
        """Advance every env one control step with ``action`` (B, A), auto-resetting the finished ones."""
        raise NotImplementedError

    def _sim_close(self) -> None:
        """Release the simulator."""

    def _sim_reset_envs(self, seeds: list[int]) -> torch.Tensor:
        """Reset every env from per-env seeds (what ``sim.evaluate`` passes); return obs (B, D).

        Default: one RNG draws every env's initial state, so it is seeded with the first entry (the run is
        reproducible for a given list). Backends with per-episode seeds give env i exactly ``seeds[i]``.
        """
        return self._sim_reset(seeds[0])

    def _sim_episode_seeds(self) -> torch.Tensor | None:
        """(B,) int64 seed of each env's current episode, or None where episodes have no seeds (-1)."""
        return None

    # ----------------------------------------------------------------- protocol
    def reset(self, seed: int | Sequence[int] | None = None) -> dict[str, Any]:
        """Reset every env and return {"state": (B, D) or (B, To, D)}.

        A list of per-env seeds (what ``sim.evaluate`` passes) goes to ``_sim_reset_envs``: by default it
        seeds the simulator with its first entry (one RNG draws every env's initial state), so the run is
        reproducible for a given list.
        """
        if seed is not None and not isinstance(seed, int | np.integer):
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"reset got {len(seeds)} seeds: expected one per env, num_envs={self.num_envs}"
                )
            for s in seeds:
                self._check_seed(s)
            return self._begin(self._sim_reset_envs([int(s) for s in seeds]))
        if seed is not None:
            self._check_seed(seed)
        return self._begin(self._sim_reset(None if seed is None else int(seed)))

    @staticmethod
    def _check_seed(seed: Any) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
            raise ValueError(f"seed={seed!r} is not valid: expected an int >= 0 or None")

    def _begin(self, obs: torch.Tensor) -> dict[str, Any]:
        """Start every env's episode from reset obs (B, D): clear the bookkeeping, fill the history window.

        Backends that start episodes from outside ``reset`` (``WarpSawyerEnv.set_state``) call it too.
        """
        obs = obs.to(torch.float32)  # (B, D)
        self._check_obs(obs)
        self._ep_return.zero_()
        self._ep_length.zero_()
        if self.obs_history is not None:
            self._window = obs[:, None].repeat(1, self.obs_history, 1)  # (B, To, D)
        self._needs_reset = False
        return self._out({"state": self._current(obs)})

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step with ``action`` (B, A) or (B, Ta, A) (numpy or torch); see the module docstring for info."""
        if self._needs_reset:
            raise RuntimeError(
                f"{type(self).__name__}.step called before reset(): call env.reset(seed=...) first"
            )
        act = torch.as_tensor(action).to(self.device, torch.float32)
        expected = (self.num_envs, *self.single_action_space.shape)
        if tuple(act.shape) != expected:
            hint = f" (action_chunk={self.action_chunk})" if self.action_chunk else ""
            raise ValueError(f"action of shape {tuple(act.shape)} is not valid: expected {expected}{hint}")
        if not bool(torch.isfinite(act).all()):
            bad = torch.nonzero(~torch.isfinite(act).flatten(1).all(1)).flatten().tolist()
            raise ValueError(f"action has NaN/inf entries for envs {bad}: expected finite values")
        chunk = act[:, None] if self.action_chunk is None else act  # (B, Ta, A)
        obs, reward, terminated, truncated, info = self._run_chunk(chunk)
        if self.action_chunk is None:
            del info["step_success"], info["steps_executed"]
        return self._out(obs), self._out(reward), self._out(terminated), self._out(truncated), self._out(info)

    def _run_chunk(
        self, chunk: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Execute (B, Ta, A) in lockstep; each env's chunk ends at its first done (module docstring)."""
        b, ta = chunk.shape[:2]
        dev = self.device
        active = torch.ones(b, dtype=torch.bool, device=dev)  # (B,) still in the chunk's episode
        reward = torch.zeros(b, device=dev)  # (B,)
        terminated = torch.zeros(b, dtype=torch.bool, device=dev)
        truncated = torch.zeros(b, dtype=torch.bool, device=dev)
        step_success = torch.zeros(b, ta, dtype=torch.bool, device=dev)  # (B, Ta)
        steps = torch.zeros(b, dtype=torch.long, device=dev)  # (B,)
        ep_return = torch.zeros(b, device=dev)  # (B,) of the chunk's episode
        ep_length = torch.zeros(b, dtype=torch.long, device=dev)
        chunk_seeds = self._episode_seed_now()  # (B,) of the chunk's episode, before any auto-reset
        final_obs: torch.Tensor | None = None
        terms: dict[str, torch.Tensor] = {}  # (B, ...) at the last step of the chunk's episode
        obs = torch.empty(0)
        for t in range(ta):
            action = torch.where(active[:, None], chunk[:, t], self.idle_action)  # (B, A)
            out = self._sim_step(action)
            obs = out.obs.to(torch.float32)
            self._check_obs(obs)
            done = out.terminated | out.truncated  # (B,)
            self._ep_return += out.reward
            self._ep_length += 1
            reward += torch.where(active, out.reward, 0.0)
            step_success[:, t] = active & out.success
            steps += active.long()
            ending = active & done
            terminated |= ending & out.terminated
            truncated |= ending & out.truncated
            ep_return = torch.where(active, self._ep_return, ep_return)
            ep_length = torch.where(active, self._ep_length, ep_length)
            for key, value in out.terms.items():
                keep = active.view(-1, *[1] * (value.dim() - 1))
                terms[key] = value.clone() if key not in terms else torch.where(keep, value, terms[key])
            final_now = self._advance_window(out.final_obs.to(torch.float32), obs, done)  # (B, ...) terminal
            if final_obs is None:
                final_obs = final_now.clone()
            else:
                final_obs[active] = final_now[active]
            self._ep_return[done] = 0.0
            self._ep_length[done] = 0
            active &= ~done
            if not bool(active.any()):
                break
        assert final_obs is not None
        current = self._current(obs)
        ended = terminated | truncated
        final_obs = torch.where(ended.view(-1, *[1] * (current.dim() - 1)), final_obs, current)
        info: dict[str, Any] = {
            **terms,
            "success": step_success.any(1),
            "step_success": step_success,
            "steps_executed": steps,
            "episode_return": ep_return,
            "episode_length": ep_length,
            "episode_seed": self._episode_seed_now(),
            "final_obs": {"state": final_obs},
            "_final_obs": ended.clone(),
        }
        if bool(ended.any()):
            info["final_info"] = {"episode_seed": chunk_seeds, "success": info["success"]}
            info["_final_info"] = ended.clone()
        return {"state": current}, reward, terminated, truncated, info

    def _advance_window(self, final_obs: torch.Tensor, obs: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Push this step's obs into the history window; return the true next obs ((B, D) or (B, To, D))."""
        if self._window is None:
            return final_obs
        shifted = self._window[:, 1:]  # (B, To-1, D)
        final_window = torch.cat([shifted, final_obs[:, None]], dim=1)  # (B, To, D) terminal window
        restart = obs[:, None].expand(-1, self._window.shape[1], -1)  # (B, To, D) new episode: padded
        self._window = torch.where(done[:, None, None], restart, torch.cat([shifted, obs[:, None]], dim=1))
        return final_window

    def _episode_seed_now(self) -> torch.Tensor:
        """(B,) int64 copy of each env's episode seed (-1 without per-episode seeds)."""
        seeds = self._sim_episode_seeds()
        if seeds is None:
            return torch.full((self.num_envs,), -1, dtype=torch.long, device=self.device)
        return seeds.to(self.device, torch.long).clone()

    def _current(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self._window is None else self._window.clone()

    def _check_obs(self, obs: torch.Tensor) -> None:
        if tuple(obs.shape) != (self.num_envs, self.obs_dim):
            raise RuntimeError(
                f"{type(self).__name__}: the simulator returned obs of shape {tuple(obs.shape)}: "
                f"expected ({self.num_envs}, {self.obs_dim})"
            )

    def _out(self, value: Any) -> Any:
        return to_numpy(value) if self.output == "numpy" else value

    # ----------------------------------------------------------------- sim.evaluate's extras
    def queue_episode_seeds(self, seeds_by_env: dict[int, list[int]]) -> None:
        """Accepted for ``sim.evaluate``; ignored: later episodes' initial states come from the simulator's RNG."""

    def start_recording(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} does not record videos: use Isaac's own video recording "
            "(Isaac Lab: --video / gymnasium.wrappers.RecordVideo on the wrapped env) or sim='metaworld'"
        )

    def pop_recordings(self, env_index: int = 0) -> list[np.ndarray]:
        raise RuntimeError(f"{type(self).__name__} does not record videos (see start_recording)")

    def close(self) -> None:
        """Close the simulator; safe to call twice."""
        if not self._closed:
            self._closed = True
            self._sim_close()

    def __enter__(self) -> TorchBatchedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        chunk = f", action_chunk={self.action_chunk}" if self.action_chunk else ""
        return f"{type(self).__name__}({self.task!r}, num_envs={self.num_envs}, device={self.device}{chunk})"
