"""The deep check of every array the reader hands out: a NaN, an inf, a value no float32 square survives
(random bytes read as 1e307) or a done flag that is not 0/1 is a DatasetError naming file, demo, key and
index, in every consumer (training windows, offline-RL transitions, episode reads)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from robosteer.policies.data import DatasetError, DatasetWriter, SequenceDataset, open_dataset
from robosteer.policies.data.hdf5 import MAX_ABS_VALUE
from robosteer.policies.rl import chunk_transitions


def _poke(path, key: str, index: tuple[int, ...], value: float) -> None:
    with h5py.File(path, "a") as f:
        f[f"data/demo_1/{key}"][index] = value


@pytest.mark.parametrize(
    ("key", "index", "value", "kind"),
    [
        ("actions", (2, 3), np.nan, "non-finite"),
        ("obs/state", (1, 0), np.inf, "non-finite"),
        ("next_obs/state", (0, 2), -np.inf, "non-finite"),
        ("rewards", (3,), np.nan, "non-finite"),
        ("states", (2, 4), 1e307, "out-of-range"),
        ("states", (1, 1), np.nan, "non-finite"),
        ("dones", (2,), 7, "out-of-range"),
    ],
)
def test_every_array_is_checked_and_the_error_names_file_demo_key_index(
    make_dataset, key, index, value, kind
):
    path = make_dataset(lengths=(5, 4, 6))
    _poke(path, key, index, value)
    with open_dataset(path) as demos:
        demos.episode(0)  # other demos stay readable
        with pytest.raises(DatasetError) as info:
            demos.episode("demo_1")
        assert demos.episode(1, check=False)["name"] == "demo_1"  # inspection tools can still read it
    msg = str(info.value)
    where = f"[{', '.join(map(str, index))}]"
    for fragment in (str(path), f"data/demo_1/{key} ", f"{kind} value", f"step {index[0]}", where):
        assert fragment in msg, f"{fragment!r} not in {msg!r}"


def test_range_limit_is_float32_safe():
    """Values up to the limit square to a finite float32, with room for sums of a hundred squares."""
    assert np.isfinite(np.float32(MAX_ABS_VALUE) ** 2 * np.float32(100))


def test_values_at_the_limit_pass_and_beyond_fail(make_dataset):
    path = make_dataset(lengths=(5, 4))
    _poke(path, "states", (0, 0), MAX_ABS_VALUE)
    with open_dataset(path) as demos:
        demos.deep_check()
    _poke(path, "states", (0, 0), -MAX_ABS_VALUE * 10)
    with (
        open_dataset(path) as demos,
        pytest.raises(DatasetError, match=r"data/demo_1/states holds an out-of-range"),
    ):
        demos.deep_check()


def test_training_windows_refuse_a_nan_action(make_dataset):
    path = make_dataset(lengths=(5, 4, 6))
    _poke(path, "actions", (3, 0), np.nan)
    with pytest.raises(
        DatasetError, match=r"data/demo_1/actions holds a non-finite value at step 3, index \[3, 0\]"
    ):
        SequenceDataset(path, ["state"], n_obs_steps=2, horizon=4, n_action_steps=2, split="all")


def test_offline_rl_transitions_refuse_a_nan_reward(make_dataset):
    """What robosteer-value and robosteer-steer offline= read."""
    path = make_dataset(lengths=(5, 4, 6))
    _poke(path, "rewards", (1,), np.nan)
    with pytest.raises(DatasetError, match=r"data/demo_1/rewards holds a non-finite value at step 1"):
        chunk_transitions(path, ["state"], 2, 2, reward="dense")


def test_a_bad_value_in_a_float_camera_names_where_it_is_stored(tmp_path):
    """image/depth is stored at obs/depth_image: the message names that path, which h5py and robomimic see."""
    path = tmp_path / "depth.hdf5"
    depth = np.ones((4, 3, 3, 1), np.float32)
    with DatasetWriter(path, {"env_name": "push-v3"}) as w:
        w.add_episode({"image/depth": depth}, np.zeros((4, 2)), np.zeros(4), np.eye(4)[-1])
    with h5py.File(path, "a") as f:
        assert f["data/demo_0/obs/depth_image"].compression == "gzip"  # compressed as the camera it is
        f["data/demo_0/obs/depth_image"][2, 1, 0, 0] = np.nan
    with open_dataset(path) as demos, pytest.raises(DatasetError) as info:
        demos.episode(0)
    assert "data/demo_0/obs/depth_image holds a non-finite value at step 2, index [2, 1, 0, 0]" in str(
        info.value
    )
