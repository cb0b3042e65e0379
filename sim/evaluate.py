"""Evaluating a policy for exactly N episodes on a batched env, with a confidence interval and videos.

Episode k always runs from initial state ``episode_seed(seed, k)`` whatever ``num_envs`` is: env i runs
episodes i, i + B, i + 2B, ... (its auto-reset seeds are queued), and episodes k >= N that envs start
while others finish are run but ignored. So a policy that acts per env (the scripted experts, or any
policy given the same per-env noise) gets the same figures with 1 or 8 envs.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from robosteer.sim.batched import BatchedEnv
from robosteer.sim.lockstep import to_numpy
from robosteer.sim.metaworld_env import check_seed, episode_seed
from robosteer.sim.stats import wilson_interval
from robosteer.sim.video import DEFAULT_FPS, write_video


def _reset_fn(policy: Any) -> tuple[Any, bool]:
    """The policy's reset and whether it takes env ids (per-env reset) or clears every env."""
    reset = getattr(policy, "reset", None)
    if reset is None:
        return None, False
    try:
        params = [
            p
            for p in inspect.signature(reset).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        return reset, False
    return reset, bool(params)


def _actions(policy: Any, obs: dict[str, np.ndarray], env: BatchedEnv) -> np.ndarray:
    """Ask the policy for (B, A), or (B, Ta, A) when the env executes chunks (``act_chunk`` if it has one)."""
    if env.action_chunk is not None and hasattr(policy, "act_chunk"):
        action = policy.act_chunk(obs)
    else:
        action = policy.act(obs)
    if hasattr(action, "detach"):  # a torch tensor
        action = action.detach().cpu().numpy()
    return np.asarray(action, dtype=np.float32)


def evaluate(
    env: BatchedEnv,
    policy: Any,
    episodes: int,
    seed: int = 0,
    video_path: str | Path | None = None,
    video_episodes: int = 1,
    video_camera: str = "corner2",
    video_size: int = 256,
    progress: bool = True,
    episode_max: Sequence[str] = (),
) -> dict[str, Any]:
    """Run ``policy`` (``reset()``, ``act(obs) -> (B, A)``) for exactly ``episodes`` episodes.

    Returns ``success_rate``, ``success_ci95`` [lo, hi] (Wilson), ``mean_return``, ``mean_episode_length``
    (env steps), ``episodes``, ``env_steps`` (all env steps taken, surplus episodes included),
    ``wall_time_s``, ``env_steps_per_s``, ``episode_seeds`` and ``successes`` (per episode, in episode
    order), ``returns``, ``lengths``, ``policy_reset`` ("per_env" or "all") and ``videos`` (paths).
    With a randomized env also ``randomization`` ({"config", "params": per-parameter summary}) and
    ``episode_params`` (each episode's drawn ``dr_*`` parameters, in episode order).
    A policy whose ``reset`` takes env ids is reset per finished env; one whose ``reset()`` takes none is
    reset for all envs whenever any episode ends (exact with num_envs=1; the surplus reset is noted).
    With ``video_path``, the first ``video_episodes`` episodes of env 0 are written there as mp4
    (``name.mp4``, then ``name_1.mp4``, ...), rendered from ``video_camera`` at ``video_size`` px.
    ``episode_max``: per-step info keys (e.g. Meta-World's ``grasp_success``) whose largest value in each
    episode is returned as ``episode_max`` {key: [per episode, in episode order]}: how the failures failed.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int | np.integer) or episodes < 1:
        raise ValueError(f"episodes={episodes!r} is not valid: expected an int >= 1")
    seed = check_seed(seed)
    num_envs = env.num_envs
    reset, per_env_reset = _reset_fn(policy)
    if reset is not None and not per_env_reset and num_envs > 1:
        warnings.warn(
            f"{type(policy).__name__}.reset() takes no env ids: all {num_envs} envs' policy state is reset "
            "whenever one episode ends (give reset an env_ids argument for exact per-env resets)",
            stacklevel=2,
        )

    # Episode k runs in env k % B as that env's (k // B)-th episode.
    per_env = math.ceil(episodes / num_envs)
    if video_path is not None and video_episodes > 0:
        env.start_recording(video_camera, video_size, min(video_episodes, per_env), env_index=0)
    obs = env.reset(seed=[episode_seed(seed, i) for i in range(num_envs)])
    # After the seeded reset (which clears the queues): the seeds of each env's later episodes.
    env.queue_episode_seeds(
        {i: [episode_seed(seed, i + num_envs * j) for j in range(1, per_env)] for i in range(num_envs)}
    )
    if reset is not None:
        if per_env_reset:
            reset(list(range(num_envs)))
        else:
            reset()

    done_count = np.zeros(num_envs, dtype=np.int64)  # finished episodes per env
    results: dict[int, tuple[bool, float, int, int]] = {}  # episode index -> (success, return, length, seed)
    params: dict[int, dict[str, float]] = {}  # episode index -> drawn randomization parameters (dr_*)
    ep_success = np.zeros(num_envs, dtype=bool)  # success so far in each env's current episode
    ep_max = {k: np.full(num_envs, -np.inf) for k in episode_max}  # (B,) each key's max this episode
    maxima: dict[int, dict[str, float]] = {}  # episode index -> {key: its max}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=episodes, desc=f"eval {env.task}", unit="ep", disable=not progress, leave=False)
    try:
        while len(results) < episodes:
            action = _actions(policy, obs, env)
            obs, _, terminated, truncated, info = env.step(action)
            # Torch backends (sim.isaac) return device tensors: the bookkeeping below is numpy.
            terminated, truncated, info = to_numpy((terminated, truncated, info))
            env_steps += int(info["steps_executed"].sum()) if "steps_executed" in info else num_envs
            ep_success |= info["success"]
            for key, running in ep_max.items():
                if key not in info:
                    known = sorted(k for k in info if not k.startswith("_") and k != "final_info")
                    raise ValueError(
                        f"episode_max: {key!r} is not a per-step info key of {env.task}: {known}"
                    )
                np.maximum(running, np.asarray(info[key], dtype=np.float64), out=running)
            finished = np.nonzero(terminated | truncated)[0]
            for i in finished:
                index = int(i + num_envs * done_count[i])
                done_count[i] += 1
                if index < episodes:
                    results[index] = (
                        bool(ep_success[i]),
                        float(info["episode_return"][i]),
                        int(info["episode_length"][i]),
                        int(info["final_info"]["episode_seed"][i]),
                    )
                    params[index] = {k: float(v[i]) for k, v in info.items() if k.startswith("dr_")}
                    maxima[index] = {k: float(v[i]) for k, v in ep_max.items()}
                    bar.update(1)
                    bar.set_postfix(success=f"{np.mean([r[0] for r in results.values()]):.0%}")
                ep_success[i] = False
                for running in ep_max.values():
                    running[i] = -np.inf
            if len(finished) and reset is not None:
                if per_env_reset:
                    reset([int(i) for i in finished])
                else:
                    reset()
    finally:
        bar.close()
    wall = time.perf_counter() - start

    videos: list[str] = []
    if video_path is not None and video_episodes > 0:
        path = Path(video_path)
        for j, frames in enumerate(env.pop_recordings(env_index=0)):
            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or '.mp4'}")
            videos.append(str(write_video(frames, target, fps=DEFAULT_FPS)))

    ordered = [results[k] for k in range(episodes)]
    successes = [r[0] for r in ordered]
    n_success = int(sum(successes))
    lo, hi = wilson_interval(n_success, episodes)
    extra: dict[str, Any] = {}
    randomization = getattr(env, "randomization", None)
    if randomization is not None and randomization.enabled:
        extra["randomization"] = {
            "config": randomization.to_dict(),
            "params": summarize_params([params[k] for k in range(episodes)]),
        }
        extra["episode_params"] = [params[k] for k in range(episodes)]
    if episode_max:
        extra["episode_max"] = {key: [maxima[k][key] for k in range(episodes)] for key in episode_max}
    return {
        "task": env.task,
        "success_rate": n_success / episodes,
        "success_ci95": [lo, hi],
        "mean_return": float(np.mean([r[1] for r in ordered])),
        "mean_episode_length": float(np.mean([r[2] for r in ordered])),
        "episodes": episodes,
        "env_steps": env_steps,
        "wall_time_s": wall,
        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
        "episode_seeds": [r[3] for r in ordered],
        "successes": successes,
        "returns": [r[1] for r in ordered],
        "lengths": [r[2] for r in ordered],
        "num_envs": num_envs,
        "seed": seed,
        "policy_reset": "per_env" if per_env_reset or num_envs == 1 else "all",
        "videos": videos,
        **extra,
    }


def summarize_params(per_episode: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Mean / std / min / max of each drawn randomization parameter over episodes (metrics.json)."""
    keys = sorted({k for p in per_episode for k in p})
    out = {}
    for key in keys:
        values = np.array([p[key] for p in per_episode if key in p], dtype=np.float64)
        out[key] = {
            "mean": float(values.mean()),
            "std": float(values.std()),
            "min": float(values.min()),
            "max": float(values.max()),
        }
    return out
