"""robomimic interop: robomimic 0.3.0's own SequenceDataset and get_dataset_info read our files (state and
two-camera pixel datasets, every cache mode), and we read robomimic-style files. Its trainer needs torchvision:
see test_robomimic_trains.py (slow, throwaway venv).

robomimic is installed with --no-deps (its torchvision pin would pull a CUDA torch); its dataset module needs
only termcolor beyond our runtime pins. Nothing is shimmed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

pytest.importorskip("robomimic", reason="robomimic is not installed (make install adds it with --no-deps)")
try:
    import robomimic.utils.obs_utils as ObsUtils
    from robomimic.utils.dataset import SequenceDataset as RobomimicSequenceDataset
except ImportError as err:  # installed but a dependency is missing: a setup bug, not a reason to skip
    pytest.fail(
        f"robomimic is installed but robomimic.utils.dataset does not import ({err}); "
        "it needs termcolor==3.3.0 in requirements-dev.txt",
        pytrace=False,
    )

from robosteer.policies.data import DatasetWriter, SequenceDataset, open_dataset


@pytest.fixture(autouse=True)
def _robomimic_low_dim_state():
    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": ["state"], "rgb": []}})


@pytest.mark.parametrize("split", [None, "train", "valid"])
def test_robomimic_reads_our_file(make_dataset, split):
    path = make_dataset(lengths=(6, 3, 9, 5, 4), valid_fraction=0.4, split_seed=1)
    to, tp = 2, 5
    rm = RobomimicSequenceDataset(
        hdf5_path=str(path),
        obs_keys=("state",),
        dataset_keys=("actions", "rewards", "dones"),
        frame_stack=to,
        seq_length=tp - to + 1,  # robomimic's window: t-To+1 .. t+Tp-To, i.e. Tp steps like ours
        pad_frame_stack=True,
        pad_seq_length=True,
        hdf5_cache_mode="low_dim",
        filter_by_attribute=split,
        load_next_obs=True,
    )
    # With Ta = Tp - To + 1 diffusion_policy's windows start at the same steps as robomimic's (one per step).
    ours = SequenceDataset(
        path, ["state"], n_obs_steps=to, horizon=tp, n_action_steps=tp - to + 1, split=split or "all"
    )
    with open_dataset(path) as d:
        names = d.split(split or "all")
        assert list(rm.demos) == names
        assert len(rm) == len(ours) == sum(d.lengths[n] for n in names)
        episodes = {n: d.episode(n) for n in names}

    for i in range(len(rm)):
        got = rm[i]
        mine = ours[i]
        np.testing.assert_array_equal(got["actions"], mine["action"].numpy())
        np.testing.assert_array_equal(got["obs"]["state"][:to], mine["obs"]["state"].numpy())

        # And against our reader, step by step.
        demo = rm._index_to_demo_id[i]
        t = i - rm._demo_id_to_start_indices[demo]
        ep = episodes[demo]
        steps = np.clip(np.arange(t - to + 1, t - to + 1 + tp), 0, len(ep["actions"]) - 1)
        np.testing.assert_array_equal(got["actions"], ep["actions"][steps])
        np.testing.assert_array_equal(got["obs"]["state"], ep["obs"]["state"][steps])
        np.testing.assert_array_equal(got["next_obs"]["state"], ep["next_obs"]["state"][steps])
        np.testing.assert_array_equal(got["rewards"], ep["rewards"][steps].astype(np.float32))
        np.testing.assert_array_equal(got["dones"], ep["dones"][steps].astype(np.float32))


def _write_robomimic_style(path, rng):
    """A file written by hand the way robomimic's conversion scripts (convert_d4rl.py, dataset_states_to_obs.py)
    and file_utils.create_hdf5_filter_key write them: flat obs keys, float64 arrays, demo_1-based names,
    env_args via json.dumps(indent=4), masks as np.array(names, dtype='S')."""
    env_meta = {"env_name": "Lift", "type": 1, "env_kwargs": {"has_renderer": False, "control_freq": 20}}
    demos = {}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        total = 0
        for i, n in enumerate((7, 4, 10), start=1):
            obs = {"robot0_eef_pos": rng.normal(size=(n + 1, 3)), "object": rng.normal(size=(n + 1, 10))}
            traj = {
                "obs": {k: v[:-1] for k, v in obs.items()},
                "next_obs": {k: v[1:] for k, v in obs.items()},
                "actions": rng.uniform(-1, 1, size=(n, 7)),
                "rewards": np.r_[np.zeros(n - 1), 1.0],
                "dones": np.r_[np.zeros(n - 1, dtype=np.int64), 1],
                "states": rng.normal(size=(n, 32)),
            }
            ep_data_grp = data.create_group(f"demo_{i}")
            for k in traj["obs"]:
                ep_data_grp.create_dataset(f"obs/{k}", data=np.array(traj["obs"][k]))
                ep_data_grp.create_dataset(f"next_obs/{k}", data=np.array(traj["next_obs"][k]))
            for k in ("actions", "rewards", "dones", "states"):
                ep_data_grp.create_dataset(k, data=np.array(traj[k]))
            ep_data_grp.attrs["model_file"] = "<mujoco model='lift'/>"
            ep_data_grp.attrs["num_samples"] = traj["actions"].shape[0]
            total += traj["actions"].shape[0]
            demos[f"demo_{i}"] = traj
        data.attrs["total"] = total
        data.attrs["env_args"] = json.dumps(env_meta, indent=4)
        f["mask/train"] = np.array(["demo_1", "demo_3"], dtype="S")
        f["mask/valid"] = np.array(["demo_2"], dtype="S")
    return env_meta, demos


def test_we_read_a_robomimic_style_file(tmp_path):
    path = tmp_path / "lift_low_dim.hdf5"
    env_meta, demos = _write_robomimic_style(path, np.random.default_rng(0))
    with open_dataset(path) as d:
        assert d.env_args == env_meta
        assert d.demo_names == ["demo_1", "demo_2", "demo_3"]
        assert d.obs_keys == ["object", "robot0_eef_pos"] and d.action_dim == 7
        assert (
            d.total_steps == 21
            and d.split("train") == ["demo_1", "demo_3"]
            and d.split("valid") == ["demo_2"]
        )
        assert d.summary()["success_rate"] is None  # robomimic files carry no 'success' attr
        for name, traj in demos.items():
            ep = d.episode(name)
            for k in traj["obs"]:
                np.testing.assert_array_equal(ep["obs"][k], traj["obs"][k])
                np.testing.assert_array_equal(ep["next_obs"][k], traj["next_obs"][k])
            for k in ("actions", "rewards", "dones", "states"):
                np.testing.assert_array_equal(ep[k], traj[k])
            assert ep["attrs"]["model_file"] == "<mujoco model='lift'/>"
    ds = SequenceDataset(path, ["robot0_eef_pos", "object"], n_obs_steps=2, horizon=4, n_action_steps=2)
    assert len(ds) == (7 - 4 + 1 + 1 + 1) + (10 - 4 + 1 + 1 + 1)  # L - Tp + pad_before + pad_after + 1
    first = ds[0]
    assert first["obs"]["object"].dtype.is_floating_point and first["obs"]["object"].shape == (2, 10)
    np.testing.assert_allclose(
        first["action"].numpy(), demos["demo_1"]["actions"][[0, 0, 1, 2]].astype(np.float32)
    )

    # robomimic's own reader agrees on the same hand-written file.
    ObsUtils.initialize_obs_utils_with_obs_specs(
        {"obs": {"low_dim": ["robot0_eef_pos", "object"], "rgb": []}}
    )
    rm = RobomimicSequenceDataset(
        hdf5_path=str(path),
        obs_keys=("object",),
        dataset_keys=("actions",),
        frame_stack=1,
        seq_length=1,
        hdf5_cache_mode=None,
        filter_by_attribute="valid",
    )
    assert len(rm) == 4
    # uncached: float64 as stored
    np.testing.assert_array_equal(rm[2]["actions"][0], demos["demo_2"]["actions"][2])


CAMERAS = {
    "image/agentview": (8, 10, 3),
    "image/wrist": (6, 6, 3),
}  # different shapes: no camera hides another


def write_pixel_dataset(path, lengths=(5, 3, 6), seed=0):
    """Two cameras and a state through our writer; actions in [-1, 1] (get_dataset_info refuses others)."""
    rng = np.random.default_rng(seed)
    env_args = {"env_name": "push-v3", "type": 2, "env_kwargs": {"obs": "state+image"}}
    with DatasetWriter(path, env_args, {"fps": 80.0}, valid_fraction=0.34, split_seed=seed) as w:
        for n in lengths:
            obs = {"state": rng.normal(size=(n, 5)).astype(np.float32)}
            obs |= {k: rng.integers(0, 256, size=(n, *shape), dtype=np.uint8) for k, shape in CAMERAS.items()}
            w.add_episode(obs, rng.uniform(-1, 1, size=(n, 4)), rng.uniform(size=n), np.eye(n)[-1])
    return path


def test_robomimic_get_dataset_info_reads_our_pixel_file(tmp_path):
    """robomimic's own script (it reads every obs entry's .shape: a nested obs/image group failed there)."""
    path = write_pixel_dataset(tmp_path / "pixels.hdf5")
    proc = subprocess.run(
        [sys.executable, "-m", "robomimic.scripts.get_dataset_info", "--dataset", str(path), "--verbose"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "total transitions: 14" in out and "total trajectories: 3" in out
    assert "filter key train with 2 demos" in out and "filter key valid with 1 demos" in out
    for demo, n in (("demo_0", 5), ("demo_1", 3), ("demo_2", 6)):
        assert f"episode {demo} with {n} transitions" in out
    for line in (
        "observation key agentview_image with shape (5, 8, 10, 3)",
        "observation key wrist_image with shape (5, 6, 6, 3)",
        "observation key state with shape (5, 5)",
    ):
        assert out.count(line) == 2, out  # obs and next_obs of demo_0
    assert '"env_name": "push-v3"' in out


@pytest.mark.parametrize("cache_mode", [None, "low_dim", "all"])
def test_robomimic_sequence_dataset_reads_each_camera_from_its_own_key(tmp_path, cache_mode):
    path = write_pixel_dataset(tmp_path / "pixels.hdf5")
    ObsUtils.initialize_obs_utils_with_obs_specs(
        {"obs": {"low_dim": ["state"], "rgb": ["agentview_image", "wrist_image"]}}
    )
    keys = {
        "state": "state",
        "agentview_image": "image/agentview",
        "wrist_image": "image/wrist",
    }  # theirs: ours
    to, tp = 2, 4
    rm = RobomimicSequenceDataset(
        hdf5_path=str(path),
        obs_keys=tuple(keys),
        dataset_keys=("actions", "rewards", "dones"),
        frame_stack=to,
        seq_length=tp - to + 1,
        pad_frame_stack=True,
        pad_seq_length=True,
        hdf5_cache_mode=cache_mode,
        filter_by_attribute="train",
        load_next_obs=True,
    )
    with open_dataset(path) as d:
        names = d.split("train")
        assert d.image_layout == "flat" and list(rm.demos) == names
        episodes = {n: d.episode(n) for n in names}
    assert len(rm) == sum(len(ep["actions"]) for ep in episodes.values())
    for i in range(len(rm)):
        got = rm[i]
        assert set(got["obs"]) == set(got["next_obs"]) == set(keys)
        demo = rm._index_to_demo_id[i]
        ep = episodes[demo]
        t = i - rm._demo_id_to_start_indices[demo]
        steps = np.clip(np.arange(t - to + 1, t - to + 1 + tp), 0, len(ep["actions"]) - 1)
        for theirs, ours in keys.items():
            assert got["obs"][theirs].dtype == ep["obs"][ours].dtype  # uint8 frames stay uint8 (HWC)
            np.testing.assert_array_equal(got["obs"][theirs], ep["obs"][ours][steps])
            np.testing.assert_array_equal(got["next_obs"][theirs], ep["next_obs"][ours][steps])
        np.testing.assert_array_equal(got["actions"], ep["actions"][steps])
