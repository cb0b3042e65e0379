"""Demonstrations as chunk transitions, for critics defined over executed actions (DSRL-NA, EXPO, V-GPS).

A robomimic-layout dataset (``policies.data``) becomes ``(s, a, r, s', done)`` tuples of the online loops'
chunk MDP: ``s``/``s'`` To-step histories padded at the start with the first observation (as
``sim.ObsHistoryWrapper``), ``a`` the Ta actions executed from ``s``, ``done`` a true termination (success).
Every start step is used (any Ta consecutive actions are a chunk the env could have executed); a chunk cut
short by termination is padded with its last action, which the env never executes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from robosteer.policies.data import DatasetError, open_dataset

REWARDS = ("sparse", "dense", "shaped")


def shaped_chunk_reward(summed: np.ndarray, steps: np.ndarray, chunk: int, scale: float) -> np.ndarray:
    """Meta-World's dense reward as a per-chunk cost in [-1, 0]: Σ_t (r_t/scale − 1) / Ta over executed steps.

    Why not the raw sum: episodes end at success, so a positive reward teaches hovering near the goal; with
    every step ≤ 0 finishing is never worse. ``summed``: env reward over the ``steps`` executed steps of each
    chunk; ``scale``: the env's largest per-step reward (10 for Meta-World v3).
    """
    if scale <= 0:
        raise ValueError(f"reward_scale must be > 0 (the env's largest per-step reward), got {scale}")
    return (np.asarray(summed, dtype=np.float64) / scale - np.asarray(steps, dtype=np.float64)) / chunk


def _history(frames: np.ndarray, end: np.ndarray, n_obs_steps: int) -> np.ndarray:
    """Histories (N, To, ...) of ``frames`` ending at each index in ``end``, padded with frame 0."""
    offsets = np.arange(-n_obs_steps + 1, 1)  # (To,) oldest first
    idx = np.clip(end[:, None] + offsets[None], 0, None)  # (N, To)
    return frames[idx]


def _mc_returns(r: np.ndarray, stride: int, discount: float, terminated: bool) -> np.ndarray:
    """R_t = r_t + γ·R_{t+stride} over one demo's chunk rewards r (N,); beyond the end: 0 or r_last/(1−γ)."""
    if not 0.0 <= discount < 1.0:
        raise ValueError(f"discount must lie in [0, 1), got {discount}")
    tail = 0.0 if terminated else float(r[-1]) / (1.0 - discount)
    out = np.zeros(len(r), dtype=np.float64)
    for i in range(len(r) - 1, -1, -1):
        out[i] = r[i] + discount * (out[i + stride] if i + stride < len(r) else tail)
    return out.astype(np.float32)


def chunk_transitions(
    path: str | os.PathLike,
    obs_keys: Sequence[str],
    n_obs_steps: int,
    n_action_steps: int,
    reward: str = "sparse",
    demo_limit: int | None = None,
    discount: float | None = None,
    reward_scale: float = 10.0,
    obs_transform: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
) -> dict[str, torch.Tensor]:
    """Chunk transitions of every demo: ``obs/<key>`` and ``next_obs/<key>`` (N, To, ...), ``action``
    (N, Ta·A) flattened executed chunks, ``reward`` (N,), ``done`` (N,).

    With ``discount`` (γ per chunk) also ``mc_return`` (N,), Cal-QL's bound R_t = r_t + γ·R_{t+Ta}; past the
    demo's end a time-out keeps its last chunk reward forever (r_last / (1 − γ)), a success adds 0.

    ``reward="sparse"``: −1 per chunk, 0 for the chunk in which the demo succeeded (its ``dones`` flag, set
    only on true termination); ``"dense"``: the recorded rewards summed over the chunk; ``"shaped"``:
    :func:`shaped_chunk_reward` of that sum (``reward_scale`` = max step reward).

    ``obs_transform``: raw windows {key: (N, To, ...)} (as stored, images uint8) → the observations to keep
    {key': (N, ...)}, e.g. a frozen base's embedding of camera windows (steering from pixels).
    """
    if reward not in REWARDS:
        raise ValueError(f"offline reward={reward!r} is not known: expected one of {REWARDS}")
    if n_obs_steps < 1 or n_action_steps < 1:
        raise ValueError(f"n_obs_steps and n_action_steps must be >= 1, got {n_obs_steps}, {n_action_steps}")
    if demo_limit is not None and demo_limit < 1:  # as SequenceDataset: 0 is not "all"
        raise ValueError(f"demo_limit must be None (every demo) or >= 1, got {demo_limit}")
    parts: dict[str, list[np.ndarray]] = {}
    with open_dataset(path) as demos:
        keys = demos.check_obs_keys(obs_keys)
        names = demos.demo_names[:demo_limit]  # (None: all)
        for name in names:
            ep = demos.episode(name, keys)
            if ep["dones"] is None or (reward != "sparse" and ep["rewards"] is None):
                missing = "dones" if ep["dones"] is None else "rewards"
                raise DatasetError(
                    f"{path}: data/{name} has no '{missing}': it is needed for offline RL data"
                )
            one = episode_transitions(
                ep, keys, n_obs_steps, n_action_steps, reward, reward_scale, discount, obs_transform
            )
            for k, v in one.items():
                parts.setdefault(k, []).append(v)
    if not parts:
        raise DatasetError(f"{path}: no demonstrations to turn into offline transitions")
    return {k: torch.from_numpy(np.concatenate(v)) for k, v in parts.items()}


def episode_transitions(
    ep: dict[str, Any],
    keys: Sequence[str],
    n_obs_steps: int,
    n_action_steps: int,
    reward: str = "sparse",
    reward_scale: float = 10.0,
    discount: float | None = None,
    obs_transform: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
    stride: int = 1,
) -> dict[str, np.ndarray]:
    """One episode's chunk transitions (numpy; :func:`chunk_transitions`' fields). ``ep``: ``obs`` {key:
    (T, ...)}, ``next_obs`` (or None: the last observation stands for the state after it), ``actions``
    (T, A), ``rewards`` (T,) (or None for sparse), ``dones`` (T,) true terminations. ``stride``: a chunk
    starts every ``stride`` steps (1: every step; Ta: the chunks a robot executed back to back)."""
    actions = np.asarray(ep["actions"], dtype=np.float32)  # (T, A)
    dones = np.asarray(ep["dones"]).astype(bool)  # (T,)
    terminated = bool(dones.any())
    # Truncate at the first true termination: nothing after it was executed by the chunk wrapper.
    t_len = int(np.flatnonzero(dones)[0]) + 1 if terminated else len(actions)
    start = np.arange(0, t_len, stride)  # (N,) every chunk start
    at = start[:, None] + np.arange(n_action_steps)[None]  # (N, Ta) step of each chunk entry
    steps = np.minimum(at, t_len - 1)  # (N, Ta)
    end = np.minimum(start + n_action_steps, t_len)  # index of s' in the T+1 state sequence
    chunk_done = (start + n_action_steps >= t_len) & terminated  # holds the terminal step
    if reward == "sparse":
        r = np.where(chunk_done, 0.0, -1.0)
    else:
        rewards = np.asarray(ep["rewards"], dtype=np.float64)[:t_len]
        valid = at < t_len  # (N, Ta)
        r = (rewards[steps] * valid).sum(axis=1)
        if reward == "shaped":
            r = shaped_chunk_reward(r, valid.sum(axis=1), n_action_steps, reward_scale)
    out: dict[str, np.ndarray] = {}
    if discount is not None:
        out["mc_return"] = _mc_returns(r, n_action_steps // stride or 1, discount, terminated=terminated)
    dtype = None if obs_transform is not None else np.float32  # images stay uint8 for the transform
    windows = {}  # {key: (T+1, To, ...)}: the window ending at every state (transform only)
    for k in keys:
        obs = np.asarray(ep["obs"][k], dtype=dtype)[:t_len]
        last = obs[-1:] if ep["next_obs"] is None else ep["next_obs"][k][t_len - 1 : t_len]
        frames = np.concatenate([obs, np.asarray(last, dtype=obs.dtype)])  # (T+1, ...) states
        if obs_transform is not None:
            windows[k] = _history(frames, np.arange(t_len + 1), n_obs_steps)
            continue
        out[f"obs/{k}"] = _history(frames, start, n_obs_steps)
        out[f"next_obs/{k}"] = _history(frames, end, n_obs_steps)
    if obs_transform is not None:  # each state's window transformed once, then gathered
        for k, v in obs_transform(windows).items():  # {key: (T+1, ...)}
            out[f"obs/{k}"] = v[start]
            out[f"next_obs/{k}"] = v[end]
    out["action"] = actions[steps].reshape(len(start), -1)
    out["reward"] = r.astype(np.float32)
    out["done"] = chunk_done.astype(np.float32)
    return out
