"""Action chunking: one env step executes a (Ta, A) chunk and stops early at the episode's end.

The wrapper sits on each single env, inside the vector env's worker, so in a batch every env stops at
its own termination step and the batched env then auto-resets exactly the envs that finished. This is
how chunked policies (diffusion policy's Ta executed actions) are evaluated without wasting steps past
success and without stepping a finished episode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ActionChunkWrapper(gym.Wrapper):
    """Step a single env with a (Ta, A) chunk; reward is summed over the executed steps.

    info (besides the last executed step's info): ``success`` True if any executed step succeeded,
    ``step_success`` (Ta,) bool per chunk step (False for steps not executed), ``steps_executed`` int.
    """

    def __init__(self, env: gym.Env, chunk: int, render_last: int | None = None) -> None:
        super().__init__(env)
        if isinstance(chunk, bool) or not isinstance(chunk, int | np.integer) or chunk < 1:
            raise ValueError(f"action_chunk={chunk!r} is not valid: expected an int >= 1 (e.g. 8) or None")
        self.chunk = int(chunk)
        # render="policy_steps": camera images only for the chunk's last ``render_last`` steps (the window the
        # policy reads, To), the last ``render_last`` steps before the time limit, and the step that ends an
        # episode; the others repeat the last rendered frame. None: every step renders.
        self.render_last = None if render_last is None else int(render_last)
        inner = env.action_space
        low = np.broadcast_to(inner.low, (self.chunk, *inner.shape))
        high = np.broadcast_to(inner.high, (self.chunk, *inner.shape))
        self.action_space = gym.spaces.Box(low, high, dtype=inner.dtype)  # (Ta, A)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Execute up to Ta actions, stopping after the step that terminates or truncates the episode."""
        actions = np.asarray(action)  # (Ta, A)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"action chunk shape {actions.shape} is not valid: expected {self.action_space.shape}"
            )
        step_success = np.zeros(self.chunk, dtype=bool)  # (Ta,)
        total = 0.0
        terminated = truncated = False
        base = self.env.unwrapped
        lazy = self.render_last is not None and bool(getattr(base, "cameras", ()))
        for t in range(self.chunk):
            if lazy:
                base.render_images = t >= self.chunk - self.render_last or base.steps_left <= self.render_last
            obs, reward, terminated, truncated, info = self.env.step(actions[t])
            total += float(reward)
            step_success[t] = bool(info.get("success", False))
            if terminated or truncated:
                break
        if lazy:
            base.render_images = True
        info = dict(info)
        info.update(success=bool(step_success.any()), step_success=step_success, steps_executed=t + 1)
        return obs, total, terminated, truncated, info
