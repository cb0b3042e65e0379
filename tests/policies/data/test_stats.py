"""RunningStats / compute_stats by hand: chunks of any length (one step, none), 1-d series, float64
accumulation of float32 data, and a single array given where chunks are expected."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer.policies.data import DatasetError
from robosteer.policies.data.stats import RunningStats, compute_stats


def _by_hand(x: np.ndarray) -> dict[str, np.ndarray]:
    """min, max, mean and population std in float64, then float32 (what the stats promise)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.sum(axis=0) / len(x)
    std = np.sqrt(((x - mean) ** 2).sum(axis=0) / len(x))
    return {
        k: np.asarray(v, np.float32)
        for k, v in zip(("min", "max", "mean", "std"), (x.min(0), x.max(0), mean, std))
    }


def test_one_step_and_empty_chunks_fold_in_as_what_they_hold() -> None:
    acc = RunningStats()
    assert acc.count == 0  # nothing seen yet
    for chunk in (
        np.array([[1.0, 10.0]]),
        np.zeros((0, 2)),
        np.array([[3.0, -2.0], [5.0, 4.0]]),
        [[7.0, 0.0]],
    ):
        acc.update(chunk)
    assert acc.count == 4
    got = acc.result()
    want = _by_hand(np.array([[1.0, 10.0], [3.0, -2.0], [5.0, 4.0], [7.0, 0.0]]))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6)
        assert got[name].dtype == np.float32 and got[name].shape == (2,)
    acc.update(np.float64(100.0))  # a 0-d value has no time axis: ignored
    assert acc.count == 4


def test_a_one_dimensional_series_gives_scalar_stats() -> None:
    stats = compute_stats({"reward": [np.array([0.0, 1.0]), np.array([2.0])]})["reward"]
    assert {k: float(v) for k, v in stats.items()} == pytest.approx(
        {"min": 0.0, "max": 2.0, "mean": 1.0, "std": float(np.sqrt(2 / 3))}
    )
    assert stats["mean"].shape == ()


def test_a_single_array_is_one_chunk_not_its_rows() -> None:
    x = np.array([[1.0, 2.0], [3.0, 6.0], [8.0, 1.0]])
    got = compute_stats({"state": x})["state"]  # an ndarray where an iterable of chunks is expected
    for name, value in _by_hand(x).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6)


def test_float32_data_is_accumulated_in_float64() -> None:
    """Float32 sums of 4,096 steps near 1 err by several float32 ulps; float64 ones round to the true value."""
    x = (1.0 + 1e-4 * np.arange(4096, dtype=np.float64)).astype(np.float32)[:, None]  # (T, 1)
    got = compute_stats({"x": [x[:1000], x[1000:]]})["x"]
    want = _by_hand(x)
    np.testing.assert_array_equal(got["mean"], want["mean"])
    np.testing.assert_allclose(got["std"], want["std"], rtol=1e-6)


def test_no_samples_is_an_error_naming_the_key() -> None:
    with pytest.raises(DatasetError, match="no samples for key 'action'"):
        compute_stats({"action": [np.zeros((0, 2))]})
