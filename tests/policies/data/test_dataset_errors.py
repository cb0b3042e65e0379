"""Bad input: every broken file raises DatasetError naming the file, the path inside it and what was expected."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from robosteer.policies.data import DatasetError, open_dataset


def _broken(make_dataset, edit: Callable[[h5py.File], None]) -> Path:
    path = make_dataset(lengths=(5, 3, 4))
    with h5py.File(path, "a") as f:
        edit(f)
    return path


def _raises(path: Path, *fragments: str) -> str:
    with pytest.raises(DatasetError) as info:
        open_dataset(path)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    assert "Traceback" not in msg
    return msg


def test_missing_file_names_the_nearest_file(tmp_path, make_dataset):
    make_dataset(name="demos.hdf5")
    _raises(tmp_path / "demo.hdf5", "no such file", "did you mean 'demos.hdf5'")


def test_directory_is_not_a_dataset(tmp_path):
    _raises(tmp_path, "is a directory")


def test_truncated_file(tmp_path, make_dataset):
    good = make_dataset(lengths=(50, 50))
    bad = tmp_path / "truncated.hdf5"
    bad.write_bytes(good.read_bytes()[:1000])
    _raises(bad, "truncated or corrupt")


def test_corrupt_middle_of_file(tmp_path, make_dataset):
    """Damaged metadata after a valid superblock must not leak an h5py error either."""
    good = make_dataset(lengths=(50, 50))
    raw = bytearray(good.read_bytes())
    raw[200:4000] = b"\xff" * (4000 - 200)
    bad = tmp_path / "corrupt.hdf5"
    bad.write_bytes(bytes(raw))
    with pytest.raises(DatasetError) as info:
        open_dataset(bad)
    assert str(bad) in str(info.value) and "corrupt" in str(info.value)


def test_not_an_hdf5_file(tmp_path):
    path = tmp_path / "notes.hdf5"
    path.write_text("episode,reward\n0,1.0\n")
    _raises(path, "not an HDF5 file")


def test_missing_data_group(tmp_path):
    path = tmp_path / "nodata.hdf5"
    with h5py.File(path, "w") as f:
        f.create_group("dataa")
    _raises(path, "missing group 'data'", "did you mean 'dataa'")


def test_demo_missing_actions(make_dataset):
    path = _broken(make_dataset, lambda f: f["data/demo_1"].move("actions", "action"))
    _raises(path, "data/demo_1/actions is missing", "(3, A)", "did you mean 'action'")


def test_demo_missing_obs_key(make_dataset):
    path = _broken(make_dataset, lambda f: f["data/demo_2/obs"].move("state", "states"))
    _raises(path, "data/demo_2/obs/state is missing", "did you mean 'states'")


def test_demo_missing_obs_group(make_dataset):
    path = _broken(make_dataset, lambda f: f["data/demo_0"].move("obs", "observations"))
    _raises(path, "data/demo_0/obs is missing", "did you mean 'observations'")


def test_obs_length_differs_from_num_samples(make_dataset):
    def edit(f):
        del f["data/demo_1/obs/state"]
        f["data/demo_1/obs/state"] = np.zeros((2, 3), np.float32)

    _raises(_broken(make_dataset, edit), "data/demo_1/obs/state has shape (2, 3), expected (3, 3)")


def test_actions_length_differs_from_num_samples(make_dataset):
    def edit(f):
        f["data/demo_0"].attrs["num_samples"] = 6

    _raises(_broken(make_dataset, edit), "data/demo_0/actions has shape (5, 4), expected (6, A)")


def test_rewards_length_mismatch(make_dataset):
    def edit(f):
        del f["data/demo_2/rewards"]
        f["data/demo_2/rewards"] = np.zeros(7)

    _raises(_broken(make_dataset, edit), "data/demo_2/rewards has shape (7,), expected length 4")


def test_next_obs_shape_mismatch(make_dataset):
    def edit(f):
        del f["data/demo_0/next_obs/state"]
        f["data/demo_0/next_obs/state"] = np.zeros((5, 2), np.float32)

    _raises(_broken(make_dataset, edit), "data/demo_0/next_obs/state has shape (5, 2), expected (5, 3)")


def test_missing_num_samples(make_dataset):
    _raises(_broken(make_dataset, lambda f: f["data/demo_1"].attrs.__delitem__("num_samples")), "num_samples")


def test_total_mismatch(make_dataset):
    def edit(f):
        f["data"].attrs["total"] = 99

    _raises(_broken(make_dataset, edit), "data.attrs['total'] = 99, expected 12")


def test_missing_or_bad_env_args(make_dataset):
    _raises(
        _broken(make_dataset, lambda f: f["data"].attrs.__delitem__("env_args")),
        "data.attrs['env_args'] is missing",
    )


def test_env_args_not_json(tmp_path, make_dataset):
    def edit(f):
        f["data"].attrs["env_args"] = "{not json"

    _raises(_broken(make_dataset, edit), "env_args'] is not valid JSON")


def test_badly_named_demo(make_dataset):
    _raises(
        _broken(make_dataset, lambda f: f["data"].move("demo_2", "episode_2")), "data/episode_2 is not a demo"
    )


def test_mask_names_unknown_demo(make_dataset):
    def edit(f):
        del f["mask/train"]
        f["mask/train"] = np.array(["demo_0", "demo_7"], dtype="S")

    _raises(_broken(make_dataset, edit), "mask/train names 'demo_7'")


def test_action_dim_differs_between_demos(make_dataset):
    def edit(f):
        del f["data/demo_2/actions"]
        f["data/demo_2/actions"] = np.zeros((4, 2), np.float32)

    _raises(_broken(make_dataset, edit), "data/demo_2/actions has action dim 2, expected 4")


def test_lookup_errors_name_nearest_choice(make_dataset):
    with open_dataset(make_dataset()) as d:
        with pytest.raises(DatasetError, match=r"obs key 'stat' .*did you mean 'state'"):
            d.episode(0, obs_keys=["stat"])
        with pytest.raises(DatasetError, match=r"no demo 'demo_9'.*did you mean"):
            d.episode("demo_9")
        with pytest.raises(DatasetError, match=r"episode index 5 out of range \(the file holds 2 episodes\)"):
            d.episode(5)
        assert json.loads(json.dumps(d.summary()))["episodes"] == 2  # summary is JSON-serialisable


def test_missing_camera_names_its_stored_path(make_dataset):
    """A camera is stored at obs/<camera>_image: a demo without it is named by that path."""
    path = make_dataset(lengths=(5, 3, 4), images=True)
    with h5py.File(path, "a") as f:
        f["data/demo_2/obs"].move("corner2_image", "corner3_image")
    _raises(path, "data/demo_2/obs/corner2_image is missing (present in data/demo_0)", "'image/corner3'")


def test_one_camera_in_both_layouts_is_refused(make_dataset):
    """obs/image/<camera> (old) and obs/<camera>_image (flat) in one demo would both be image/<camera>."""
    path = make_dataset(lengths=(5, 3), images=True)
    with h5py.File(path, "a") as f:
        f["data/demo_1/obs/image/corner2"] = f["data/demo_1/obs/corner2_image"][()]
    _raises(
        path,
        "data/demo_1/obs/corner2_image and data/demo_1/obs/image/corner2 both hold obs key 'image/corner2'",
    )
