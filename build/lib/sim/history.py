"""Observation history: each observation becomes the window of the last To observations.

Policies condition on To observations (diffusion_policy's MultiStepWrapper). When an env executes
whole action chunks, only the chunk's last observation comes back, so the window has to be kept inside
the worker, step by step, below the chunk wrapper. At reset the first observation is repeated To times,
as the policies' own ``act`` pads an episode start.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np


class ObsHistoryWrapper(gym.Wrapper):
    """Dict observations {key: (...)} → {key: (To, ...)}, oldest first."""

    def __init__(self, env: gym.Env, n_obs_steps: int) -> None:
        super().__init__(env)
        if isinstance(n_obs_steps, bool) or not isinstance(n_obs_steps, int | np.integer) or n_obs_steps < 1:
            raise ValueError(
                f"obs_history={n_obs_steps!r} is not valid: expected an int >= 1 (e.g. 2) or None"
            )
        self.n_obs_steps = int(n_obs_steps)
        spaces = {}
        for key, space in env.observation_space.spaces.items():
            low = np.repeat(space.low[None], self.n_obs_steps, axis=0)
            high = np.repeat(space.high[None], self.n_obs_steps, axis=0)
            spaces[key] = gym.spaces.Box(low, high, dtype=space.dtype)  # (To, ...)
        self.observation_space = gym.spaces.Dict(spaces)
        self._window: dict[str, deque] = {}

    def _stacked(self) -> dict[str, np.ndarray]:
        return {k: np.stack(list(w)) for k, w in self._window.items()}

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._window = {k: deque([v] * self.n_obs_steps, maxlen=self.n_obs_steps) for k, v in obs.items()}
        return self._stacked(), info

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        for k, v in obs.items():
            self._window[k].append(v)
        return self._stacked(), reward, terminated, truncated, info
