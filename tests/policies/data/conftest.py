"""Tiny synthetic datasets for the dataset-layer tests (a few episodes, a few steps: fast on 2 cores)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from robosteer.policies.data import DatasetWriter


def synthetic_episode(ep: int, length: int, images: bool = False, action_dim: int = 4) -> dict:
    """Values encode (episode, step) so that window arithmetic can be checked by eye: state[t, 0] = 100*ep + t."""
    t = np.arange(length, dtype=np.float32)
    state = np.stack([100 * ep + t, -(100 * ep + t), np.full_like(t, ep)], axis=1)  # (T, 3)
    actions = np.stack([100 * ep + t + 0.5 * j for j in range(action_dim)], axis=1)  # (T, A)
    actions = actions.astype(np.float32)
    obs = {"state": state}
    if images:
        frames = np.zeros((length, 8, 10, 3), dtype=np.uint8)  # (T, H, W, 3)
        frames[:] = ((10 * ep + np.arange(length)) % 256).astype(np.uint8)[:, None, None, None]
        obs["image/corner2"] = frames
    rewards = (t == length - 1).astype(np.float32)  # (T,)
    dones = (t == length - 1).astype(np.uint8)  # (T,)
    states = np.repeat(t[:, None], 5, axis=1).astype(np.float64) + ep  # (T, 5)
    return {
        "obs": obs,
        "actions": actions,
        "rewards": rewards,
        "dones": dones,
        "states": states,
        "attrs": {"seed": 1000 + ep, "success": ep % 2 == 0},
    }


@pytest.fixture
def synthetic() -> Callable[..., dict]:
    """The :func:`synthetic_episode` factory (a fixture, so test modules never import conftest by name)."""
    return synthetic_episode


@pytest.fixture
def make_dataset(tmp_path: Path) -> Callable[..., Path]:
    """``make_dataset(lengths=(5, 3), images=False, name="demos.hdf5", env_name="push-v3", **writer_kwargs)``."""

    def make(
        lengths=(5, 3),
        images: bool = False,
        name: str = "demos.hdf5",
        env_name: str = "push-v3",
        action_dim: int = 4,
        **kwargs,
    ) -> Path:
        path = tmp_path / name
        with DatasetWriter(
            path, {"env_name": env_name, "type": 2, "env_kwargs": {"obs": "state"}}, **kwargs
        ) as w:
            for ep, length in enumerate(lengths):
                w.add_episode(**synthetic_episode(ep, length, images=images, action_dim=action_dim))
        return path

    return make
