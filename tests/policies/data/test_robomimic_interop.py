"""robomimic interop: robomimic 0.3.0's own SequenceDataset reads our files, and we read robomimic-style files.

robomimic is installed with --no-deps (its torchvision pin would pull a CUDA torch); its dataset module needs
only termcolor beyond our runtime pins. Nothing is shimmed.
"""

from __future__ import annotations

import json

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

from robosteer.policies.data import SequenceDataset, open_dataset


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
