"""The episode in flight as data: its seed, the seed stream of the auto-resets after it, and the actions
played since its reset.

A steering run keeps it in ``checkpoints/latest`` so that ``resume=true`` retraces the uninterrupted run
step for step. MuJoCo is deterministic, so resetting to the episode's seed and replaying its actions rebuilds
the simulator, the observation window, the step counter and any randomization state exactly, through the
same code that produced them (no pickled simulator). A digest of the last observation tells a replay that
diverged (another MuJoCo build, another task) from one that did not.
"""

from __future__ import annotations

import hashlib
from typing import Any

import gymnasium as gym
import numpy as np


def observation_digest(obs: dict[str, np.ndarray]) -> str:
    """A short hash of a dict observation's keys, shapes, dtypes and bytes."""
    h = hashlib.sha1()
    for key in sorted(obs):
        value = np.ascontiguousarray(obs[key])
        h.update(f"{key}{value.shape}{value.dtype}".encode())
        h.update(value.tobytes())
    return h.hexdigest()[:16]


class EpisodeStateWrapper(gym.Wrapper):
    """Outermost on a single env: records the actions since the last reset, and rebuilds an episode from them."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._actions: list[np.ndarray] = []  # each the action as stepped: (A,) or (Ta, A)
        self._last_obs: dict[str, np.ndarray] | None = None

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._actions, self._last_obs = [], obs
        return obs, info

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        out = self.env.step(action)
        self._actions.append(np.array(action, dtype=np.float32, copy=True))
        self._last_obs = out[0]
        return out

    def episode_state(self) -> dict[str, Any]:
        """This env's episode in flight: ``seed``, ``seed_stream``, ``actions`` (n, ...) and ``obs_digest``."""
        base = self.env.unwrapped
        shape = self.env.action_space.shape
        actions = np.stack(self._actions) if self._actions else np.zeros((0, *shape), dtype=np.float32)
        return {
            "seed": int(base.current_episode_seed),
            "seed_stream": base.seed_stream_state(),
            "actions": actions,
            "obs_digest": observation_digest(self._last_obs) if self._last_obs is not None else "",
        }

    def restore_episode(self, states: dict[int, dict[str, Any]]) -> tuple[dict[str, np.ndarray], bool]:
        """Rebuild ``states[env_index]`` (an :meth:`episode_state`): reset to its seed, replay its actions, put
        its seed stream back. Returns (the observation it had, whether that matches the recorded digest)."""
        base = self.env.unwrapped
        state = states[int(base.env_index)]
        actions = np.asarray(state["actions"], dtype=np.float32)
        obs, _ = self.reset(seed=int(state["seed"]))
        for action in actions:
            obs, _, terminated, truncated, _ = self.step(action)
            if terminated or truncated:  # it was still running when recorded: another simulator replays it
                return obs, False
        base.set_seed_stream_state(state["seed_stream"])
        return obs, observation_digest(obs) == state["obs_digest"]
