"""Fixed-length training windows over demonstrations, with diffusion_policy's SequenceSampler padding.

Each item is ``{"obs": {key: (To, ...)}, "action": (Tp, A)}`` (plus ``"task_id"`` for several files): a window
of Tp = ``horizon`` steps whose first To = ``n_obs_steps`` steps give the observations (diffusion_policy's
convention). Windows may start up to To - 1 steps before an episode and end up to Ta - 1 steps after it,
repeating its first/last step. Everything is loaded into memory once: per-item HDF5 reads dominate training.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data

from robosteer.policies.data.errors import DatasetError
from robosteer.policies.data.hdf5 import ACTION_KEY, is_image, open_dataset
from robosteer.policies.data.stats import compute_stats


def create_indices(
    episode_ends: np.ndarray, sequence_length: int, pad_before: int = 0, pad_after: int = 0
) -> np.ndarray:
    """diffusion_policy's ``create_indices``: one row ``[buffer_start, buffer_end, sample_start, sample_end]``
    per window, where ``buffer[buffer_start:buffer_end]`` fills ``window[sample_start:sample_end]`` and the
    rest of the window repeats the edge steps. ``episode_ends`` are cumulative episode ends, (E,).

    pad_before/pad_after are clipped to ``sequence_length - 1``; an episode of length L yields
    ``max(0, L - sequence_length + pad_before + pad_after + 1)`` windows.
    """
    pad_before = min(max(pad_before, 0), sequence_length - 1)
    pad_after = min(max(pad_after, 0), sequence_length - 1)
    rows = [np.zeros((0, 4), dtype=np.int64)]  # no episodes: an empty (0, 4) table
    start = 0
    for end in np.asarray(episode_ends, dtype=np.int64):
        length = int(end) - start
        idx = np.arange(-pad_before, length - sequence_length + pad_after + 1)  # window starts in the episode
        buffer_start = np.maximum(idx, 0) + start
        buffer_end = np.minimum(idx + sequence_length, length) + start
        sample_start = buffer_start - (idx + start)
        sample_end = sequence_length - ((idx + sequence_length + start) - buffer_end)
        rows.append(np.stack([buffer_start, buffer_end, sample_start, sample_end], axis=1))
        start = int(end)
    return np.concatenate(rows, axis=0)


class SequenceDataset(torch.utils.data.Dataset):
    """In-memory windows of (obs, action) over one or several robomimic-layout files.

    Args:
        paths: one file or several (multi-task: item ``"task_id"`` indexes the files' distinct task names,
            ``env_args["env_name"]``, so several files of one task share an id).
        obs_keys: obs keys to load, e.g. ``["state"]`` or ``["state", "image/corner2"]``.
        n_obs_steps: To, observation steps per item.
        horizon: Tp, action steps per item (the window length).
        n_action_steps: Ta, executed actions per policy call; sets ``pad_after = Ta - 1``.
        split: ``"train"``, ``"valid"`` (the files' ``mask/`` filter keys) or ``"all"``.
        demo_limit: keep only the first N demos of ``split`` in each file (demo order), for data-scaling runs;
            a file with fewer demos raises rather than silently training on less.
        return_task_id: include ``"task_id"`` in items; default: only when several paths are given.

    Low-dim obs and actions come out as float32 tensors; uint8 obs (images, channel-last) stay uint8.
    """

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        obs_keys: Sequence[str],
        n_obs_steps: int,
        horizon: int,
        n_action_steps: int,
        split: str = "train",
        demo_limit: int | None = None,
        return_task_id: bool | None = None,
    ) -> None:
        super().__init__()
        self.paths = [str(paths)] if isinstance(paths, str | os.PathLike) else [str(p) for p in paths]
        if not self.paths:
            raise DatasetError("SequenceDataset: no dataset paths given")
        if not 1 <= n_obs_steps <= horizon:
            raise ValueError(f"need 1 <= n_obs_steps <= horizon, got To={n_obs_steps}, Tp={horizon}")
        if not 1 <= n_action_steps <= horizon:
            raise ValueError(f"need 1 <= n_action_steps <= horizon, got Ta={n_action_steps}, Tp={horizon}")
        if demo_limit is not None and demo_limit < 1:
            raise ValueError(f"demo_limit must be None or >= 1, got {demo_limit}")
        self.obs_keys = list(obs_keys)
        if not self.obs_keys:
            raise ValueError("obs_keys is empty")
        self.n_obs_steps, self.horizon, self.n_action_steps = n_obs_steps, horizon, n_action_steps
        self.split = split
        self.demo_limit = demo_limit
        self.return_task_id = len(self.paths) > 1 if return_task_id is None else return_task_id

        obs_chunks: dict[str, list[np.ndarray]] = {k: [] for k in self.obs_keys}
        action_chunks: list[np.ndarray] = []
        episode_task: list[int] = []
        self.demos: list[tuple[str, str]] = []  # (path, demo name) per loaded episode
        self.env_args: list[dict[str, Any]] = []
        action_dim = None
        obs_spec: dict[str, tuple] | None = None
        self._task_ids: dict[str, int] = {}  # distinct tasks, numbered in order of first appearance
        for path in self.paths:
            with open_dataset(path) as f:
                # several files of one task (e.g. clean + noisy demos) share its task id
                task = str(f.env_args.get("env_name", path))
                task_id = self._task_ids.setdefault(task, len(self._task_ids))
                f.check_obs_keys(self.obs_keys)
                spec = {k: f.obs_shapes[k] for k in self.obs_keys}
                if obs_spec is None:
                    obs_spec, action_dim = spec, f.action_dim
                elif spec != obs_spec or f.action_dim != action_dim:
                    raise DatasetError(
                        f"{path}: obs shapes/dtypes {spec} and action dim {f.action_dim} differ from "
                        f"{self.paths[0]} ({obs_spec}, {action_dim}); multi-file datasets must match"
                    )
                names = f.split(split)[:demo_limit]
                if demo_limit is not None and len(names) < demo_limit:
                    raise DatasetError(
                        f"{path}: demo_limit={demo_limit} but split {split!r} holds only {len(names)} demos"
                    )
                for ep in f.episodes(names, self.obs_keys):
                    for k in self.obs_keys:
                        obs_chunks[k].append(ep["obs"][k])
                    action_chunks.append(ep["actions"].astype(np.float32))
                    episode_task.append(task_id)
                    self.demos.append((path, ep["name"]))
                self.env_args.append(f.env_args)
        self.action_dim = action_dim
        self._obs_spec = obs_spec or {}
        self.episode_ends = np.cumsum([len(a) for a in action_chunks], dtype=np.int64)  # (E,)
        self.episode_task = np.asarray(episode_task, dtype=np.int64)  # (E,)
        self.obs = {  # key -> (N, ...), N = total steps of the loaded episodes
            k: np.concatenate(v, axis=0) if v else np.zeros((0, *self._obs_spec[k][0]), self._obs_spec[k][1])
            for k, v in obs_chunks.items()
        }
        self.actions = np.concatenate([np.zeros((0, action_dim or 0), np.float32), *action_chunks])  # (N, A)
        self.indices = create_indices(
            self.episode_ends, horizon, pad_before=n_obs_steps - 1, pad_after=n_action_steps - 1
        )  # (num_windows, 4)
        episode_of_window = np.searchsorted(self.episode_ends, self.indices[:, 0], side="right")
        self.window_task = self.episode_task[episode_of_window]  # (num_windows,)

    # -- torch Dataset ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.get_batch(i)  # a scalar index gathers one item, without the batch dim

    def get_batch(self, indices: int | list[int] | np.ndarray) -> dict[str, Any]:
        """A whole collated batch in one vectorised gather: equals ``default_collate([self[i] for i in indices])``.

        The trainer uses it (through a BatchSampler): N ``__getitem__`` calls + collation cost ~15% of a step.
        """
        rows = self.indices[np.asarray(indices, dtype=np.int64)]  # (N, 4)
        first = rows[..., 0] - rows[..., 2]  # (N,) buffer index of window position 0
        lo, hi = rows[..., 0:1], rows[..., 1:2] - 1

        def gather(length: int) -> np.ndarray:
            # diffusion_policy's sample_sequence (padding repeats the edge steps) as a clipped gather
            return np.clip(first[..., None] + np.arange(length), lo, hi)  # (N, length)

        obs_idx = gather(self.n_obs_steps)  # (N, To)
        obs = {}
        for k, arr in self.obs.items():
            x = arr[obs_idx]  # (N, To, ...)
            obs[k] = torch.from_numpy(x if x.dtype == np.uint8 else x.astype(np.float32))
        batch: dict[str, Any] = {"obs": obs, "action": torch.from_numpy(self.actions[gather(self.horizon)])}
        if self.return_task_id:
            batch["task_id"] = torch.as_tensor(self.window_task[np.asarray(indices)], dtype=torch.long)
        return batch

    # -- metadata -----------------------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return len(self.episode_ends)

    @property
    def task_names(self) -> list[str]:
        """The distinct ``env_args["env_name"]`` of the files (first appearance order), indexed by task_id."""
        return list(self._task_ids)

    @property
    def shape_meta(self) -> dict[str, Any]:
        """The policies' ``shape_meta``: obs shapes with type ``rgb`` (images) or ``low_dim``, action shape."""
        obs = {}
        for k, (shape, dtype) in self._obs_spec.items():
            kind = "rgb" if is_image(k, np.zeros((1, *shape), dtype=dtype)) else "low_dim"
            obs[k] = {"shape": list(shape), "type": kind}
        return {"obs": obs, "action": {"shape": [int(self.action_dim or 0)]}}

    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Normalisation stats over every step of the loaded episodes (this split), obs keys and ``"action"``;
        from the episodes themselves, not from padded windows (as diffusion_policy's normaliser)."""
        spans = list(itertools.pairwise(np.concatenate([[0], self.episode_ends])))
        arrays = {**self.obs, ACTION_KEY: self.actions}
        try:
            return compute_stats({k: [arr[a:b] for a, b in spans] for k, arr in arrays.items()})
        except DatasetError as err:
            raise DatasetError(
                f"{', '.join(self.paths)}: split {self.split!r} holds no steps: {err}"
            ) from err

    def __repr__(self) -> str:
        return (
            f"SequenceDataset(paths={self.paths}, split={self.split!r}, episodes={self.num_episodes}, "
            f"windows={len(self)}, To={self.n_obs_steps}, Tp={self.horizon}, Ta={self.n_action_steps})"
        )
