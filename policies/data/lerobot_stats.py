"""LeRobot's dataset statistics, computed the way LeRobot 0.6 computes them, without importing LeRobot.

Why a port: LeRobot's dataset tools (``lerobot-edit-dataset`` delete / split / merge, ``aggregate``) rebuild
``meta/stats.json`` from the per-episode ``stats/<feature>/<stat>`` columns of ``meta/episodes``; an export
without them ends up with ``{}`` after an edit and ``lerobot-train`` fails on the first feature it normalises.
LeRobot itself needs torch and torchvision, so the exporter cannot call it; this file follows
``lerobot/datasets/compute_stats.py`` (Apache-2.0, LeRobot 0.6.1) step by step so that the numbers agree:

- vectors: per dimension over the episode's frames, in ``result_type(dtype, float32)`` (float32 for float32
  data, float64 for int64 indices), quantiles from a 5000-bin histogram (``RunningQuantileStats``);
- images and videos: from the raw frames (LeRobot uses the frames it was fed, before encoding), at most
  ``estimate_num_samples(T)`` evenly spaced ones, downsampled when larger than 300 px, per channel over all
  pixels, divided by 255 and shaped (C, 1, 1); ``count`` is the number of sampled frames;
- across episodes: ``aggregate_stats`` (count-weighted mean, parallel variance, count-weighted quantiles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{int(q * 100):02d}" for q in QUANTILES)
NUM_BINS = 5000


class RunningQuantileStats:
    """min/max/mean/std and histogram quantiles of (N, D) batches (LeRobot's class of the same name)."""

    def __init__(self, num_bins: int = NUM_BINS) -> None:
        self.count = 0
        self.num_bins = num_bins
        self._mean: np.ndarray | None = None
        self._mean_sq: np.ndarray | None = None
        self._min: np.ndarray | None = None
        self._max: np.ndarray | None = None
        self._hist: list[np.ndarray] = []
        self._edges: list[np.ndarray] = []

    def update(self, batch: np.ndarray) -> None:
        """Fold in ``batch`` (every axis but the last is a sample axis)."""
        batch = batch.reshape(-1, batch.shape[-1])
        batch = batch.astype(np.result_type(batch.dtype, np.float32), copy=False)
        n, dim = batch.shape
        if self.count == 0:
            self._mean, self._mean_sq = np.mean(batch, axis=0), np.mean(batch**2, axis=0)
            self._min, self._max = np.min(batch, axis=0), np.max(batch, axis=0)
            self._hist = [np.zeros(self.num_bins) for _ in range(dim)]
            self._edges = [
                np.linspace(self._min[i] - 1e-10, self._max[i] + 1e-10, self.num_bins + 1) for i in range(dim)
            ]
        else:
            if dim != self._mean.size:
                raise ValueError(f"vector length {dim} does not match the first batch's {self._mean.size}")
            new_max, new_min = np.max(batch, axis=0), np.min(batch, axis=0)
            changed = np.any(new_max > self._max) or np.any(new_min < self._min)
            self._max, self._min = np.maximum(self._max, new_max), np.minimum(self._min, new_min)
            if changed:
                self._rebin()
        self.count += n
        self._mean += (np.mean(batch, axis=0) - self._mean) * (n / self.count)
        self._mean_sq += (np.mean(batch**2, axis=0) - self._mean_sq) * (n / self.count)
        for i in range(dim):
            self._hist[i] += np.histogram(batch[:, i], bins=self._edges[i])[0]

    def _rebin(self) -> None:
        for i, (edges, hist) in enumerate(zip(self._edges, self._hist)):
            pad = (self._max[i] - self._min[i]) * 1e-10
            new_edges = np.linspace(self._min[i] - pad, self._max[i] + pad, self.num_bins + 1)
            new_hist = np.zeros(self.num_bins)
            for center, count in zip((edges[:-1] + edges[1:]) / 2, hist):
                if count > 0:
                    j = min(max(int(np.searchsorted(new_edges, center)) - 1, 0), self.num_bins - 1)
                    new_hist[j] += count
            self._hist[i], self._edges[i] = new_hist, new_edges

    def _quantile(self, hist: np.ndarray, edges: np.ndarray, target: float) -> float:
        cumsum = np.cumsum(hist)
        idx = int(np.searchsorted(cumsum, target))
        if idx == 0:
            return edges[0]
        if idx >= len(cumsum):
            return edges[-1]
        before = cumsum[idx - 1]
        inside = cumsum[idx] - before
        if inside == 0:
            return edges[idx]
        return edges[idx] + (target - before) / inside * (edges[idx + 1] - edges[idx])

    def get_statistics(self) -> dict[str, np.ndarray]:
        """The statistics so far; needs at least two samples (as LeRobot's)."""
        if self.count < 2:
            raise ValueError("cannot compute statistics for fewer than 2 vectors")
        out = {
            "min": self._min.copy(),
            "max": self._max.copy(),
            "mean": self._mean.copy(),
            "std": np.sqrt(np.maximum(0, self._mean_sq - self._mean**2)),
            "count": np.array([self.count]),
        }
        for key, q in zip(QUANTILE_KEYS, QUANTILES):
            out[key] = np.array(
                [self._quantile(h, e, q * self.count) for h, e in zip(self._hist, self._edges)]
            )
        return out


def estimate_num_samples(n: int, lo: int = 100, hi: int = 10_000, power: float = 0.75) -> int:
    """How many frames of an n-frame episode LeRobot reads for image stats (all of them up to 100)."""
    lo = min(lo, n)
    return max(lo, min(int(n**power), hi))


def sample_indices(n: int) -> np.ndarray:
    """The evenly spaced frame indices LeRobot samples for image stats."""
    return np.round(np.linspace(0, n - 1, estimate_num_samples(n))).astype(int)


def _downsample(img_chw: np.ndarray, target: int = 150, threshold: int = 300) -> np.ndarray:
    _, h, w = img_chw.shape
    if max(w, h) < threshold:
        return img_chw
    f = int(w / target) if w > h else int(h / target)
    return img_chw[:, ::f, ::f]


def _basic(x: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """LeRobot's fallback for a single sample: quantiles are the mean."""
    out = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([count])}
    return out | {k: out["mean"].copy() for k in QUANTILE_KEYS}


def vector_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """One episode's stats of a numeric feature: (T,) -> shape (1,) each, (T, D) -> (D,) each."""
    x = values.reshape(-1, 1) if values.ndim == 1 else values
    if len(x) < 2:
        s = _basic(x, len(x))
    else:
        rs = RunningQuantileStats()
        rs.update(x)
        s = rs.get_statistics()
        s["count"] = np.array([len(x)])
    return s


def image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """One episode's stats of a camera from its (T, H, W, C) uint8 frames: (C, 1, 1) each, in [0, 1]."""
    idx = sample_indices(len(frames))
    first = _downsample(frames[idx[0]].transpose(2, 0, 1))
    chw = np.empty((len(idx), *first.shape), dtype=frames.dtype)  # laid out as LeRobot's buffer: float32
    for i, j in enumerate(idx):  # sums depend on the memory order, and the numbers should match to the bit
        chw[i] = _downsample(frames[j].transpose(2, 0, 1))
    n, c = chw.shape[:2]
    px = chw.transpose(0, 2, 3, 1).reshape(-1, c)  # uint8: promoted to float32 as LeRobot does
    if len(px) < 2:
        s = _basic(px.astype(np.float32), n)
    else:
        rs = RunningQuantileStats()
        rs.update(px)
        s = rs.get_statistics()
    s["count"] = np.array([n])
    return {k: v if k == "count" else (v / 255.0).reshape(c, 1, 1) for k, v in s.items()}


def aggregate(stats: Sequence[Mapping[str, Mapping[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Dataset stats from per-episode ones (LeRobot's ``aggregate_stats``): what ``meta/stats.json`` holds."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in dict.fromkeys(k for s in stats for k in s):
        fts = [s[key] for s in stats if key in s]
        means = np.stack([np.asarray(f["mean"]) for f in fts])
        variances = np.stack([np.asarray(f["std"]) ** 2 for f in fts])
        counts = np.stack([np.asarray(f["count"]) for f in fts])
        total = counts.sum(axis=0)
        while counts.ndim < means.ndim:
            counts = np.expand_dims(counts, axis=-1)
        mean = (means * counts).sum(axis=0) / total
        var = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
        agg = {
            "min": np.min(np.stack([np.asarray(f["min"]) for f in fts]), axis=0),
            "max": np.max(np.stack([np.asarray(f["max"]) for f in fts]), axis=0),
            "mean": mean,
            "std": np.sqrt(var),
            "count": total,
        }
        for q in QUANTILE_KEYS:
            if all(q in f for f in fts):
                agg[q] = (np.stack([np.asarray(f[q]) for f in fts]) * counts).sum(axis=0) / total
        out[key] = agg
    return out


def flatten(stats: Mapping[str, Mapping[str, np.ndarray]], prefix: str = "stats") -> dict[str, Any]:
    """``{feature: {stat: array}}`` -> ``{"stats/<feature>/<stat>": nested list}``: the meta/episodes columns."""
    return {f"{prefix}/{ft}/{k}": np.asarray(v).tolist() for ft, s in stats.items() for k, v in s.items()}


def to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """``meta/stats.json``'s shape: nested lists per feature and stat."""
    return {ft: {k: np.asarray(v).tolist() for k, v in s.items()} for ft, s in stats.items()}
