"""Env steps/s under a fixed stream of actions: what env_speed.py, render_speed.py, pixels.py and
gpu_env_speed.py measure alike. A library, not a script: those scripts import it, never each other.
"""

from __future__ import annotations

import time

import numpy as np

from robosteer import sim


def env_steps_per_s(env: sim.BatchedEnv, seconds: float) -> float:
    """Total env steps/s (all envs) under uniform random actions, auto-resets included."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    actions = rng.uniform(-1, 1, (64, env.num_envs, 4)).astype(np.float32)  # (K, B, A)
    for k in range(10):  # warm-up
        env.step(actions[k])
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(actions[n % 64])
        n += 1
    return n * env.num_envs / (time.perf_counter() - start)


def image_env_steps_per_s(
    task: str, size: int, seconds: float, obs: str = "state+image", cameras: tuple[str, ...] = ("corner2",)
) -> float:
    """Env steps/s of a one-env batched env with ``obs`` (default: state + one camera image)."""
    with sim.make_env(task, obs=obs, image_size=size, cameras=cameras) as env:
        env.reset(seed=0)
        action = np.zeros((1, 4), np.float32)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.step(action)
            n += 1
        return n / (time.perf_counter() - start)
