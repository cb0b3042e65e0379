"""Normalisation statistics (min, max, mean, std per feature), accumulated episode by episode.

Policies normalise with these (``stats[key] = {"min", "max", "mean", "std"}``, keys are obs keys plus
``"action"``). They are accumulated in float64 with Chan's parallel update so that a dataset never has to
be concatenated in memory to be summarised, and returned as float32 arrays of the per-step shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from robosteer.policies.data.errors import DatasetError

STAT_NAMES = ("min", "max", "mean", "std")


class RunningStats:
    """Per-feature min/max/mean/std over the leading (time) axis of the arrays fed to :meth:`update`."""

    def __init__(self) -> None:
        self.count = 0
        self._mean: np.ndarray | None = None
        self._m2: np.ndarray | None = None
        self._min: np.ndarray | None = None
        self._max: np.ndarray | None = None

    def update(self, x: np.ndarray) -> None:
        """Fold in a batch of steps ``x`` of shape (T, ...)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 0 or x.shape[0] == 0:
            return
        n_b = x.shape[0]
        mean_b = x.mean(axis=0)
        m2_b = ((x - mean_b) ** 2).sum(axis=0)
        if self._mean is None:
            self.count, self._mean, self._m2 = n_b, mean_b, m2_b
            self._min, self._max = x.min(axis=0), x.max(axis=0)
            return
        if x.shape[1:] != self._mean.shape:
            raise ValueError(f"stats: step shape {x.shape[1:]} differs from earlier {self._mean.shape}")
        n_a = self.count
        n = n_a + n_b
        delta = mean_b - self._mean
        self._mean = self._mean + delta * (n_b / n)
        self._m2 = self._m2 + m2_b + delta**2 * (n_a * n_b / n)
        self._min = np.minimum(self._min, x.min(axis=0))
        self._max = np.maximum(self._max, x.max(axis=0))
        self.count = n

    def result(self) -> dict[str, np.ndarray]:
        """``{"min", "max", "mean", "std"}`` as float32 arrays (population std, ddof=0)."""
        if self._mean is None:
            raise DatasetError("stats: no samples were seen (empty split or dataset)")
        std = np.sqrt(self._m2 / self.count)
        return {k: v.astype(np.float32) for k, v in zip(STAT_NAMES, (self._min, self._max, self._mean, std))}


def compute_stats(arrays: Mapping[str, Iterable[np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Stats per key from an iterable of (T, ...) chunks per key (e.g. one chunk per episode)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key, chunks in arrays.items():
        acc = RunningStats()
        if isinstance(chunks, np.ndarray):
            chunks = [chunks]
        for chunk in chunks:
            acc.update(chunk)
        try:
            out[key] = acc.result()
        except DatasetError as err:
            raise DatasetError(f"stats: no samples for key {key!r} (empty split or dataset)") from err
    return out
