"""SequenceDataset: diffusion_policy's window/padding arithmetic, splits, demo_limit, multi-file task ids."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from robosteer.policies.data import DatasetError, DatasetWriter, SequenceDataset, create_indices, open_dataset


def _col(item, key="state"):
    return item["obs"][key][:, 0].tolist()


def test_exact_windows_and_edge_padding(make_dataset):
    # Two episodes of lengths 5 and 3; state[t, 0] = 100 * ep + t, action[t, 0] = 100 * ep + t.
    path = make_dataset(lengths=(5, 3), valid_fraction=0.0)
    ds = SequenceDataset(path, ["state"], n_obs_steps=2, horizon=4, n_action_steps=2, split="all")
    # pad_before = To - 1 = 1, pad_after = Ta - 1 = 1: windows per episode = L - Tp + 1 + 1 + 1.
    assert len(ds) == (5 - 4 + 3) + (3 - 4 + 3) == 6
    expected_actions = [
        [0, 0, 1, 2],  # starts one step before the episode: first step repeated
        [0, 1, 2, 3],
        [1, 2, 3, 4],
        [2, 3, 4, 4],  # runs one step past the end: last step repeated
        [100, 100, 101, 102],
        [100, 101, 102, 102],
    ]
    expected_obs = [[0, 0], [0, 1], [1, 2], [2, 3], [100, 100], [100, 101]]  # first To steps of each window
    for i in range(len(ds)):
        item = ds[i]
        assert item["action"][:, 0].tolist() == expected_actions[i], i
        assert _col(item) == expected_obs[i], i
        assert item["action"][:, 1].tolist() == [a + 0.5 for a in expected_actions[i]]
        assert "task_id" not in item
    item = ds[0]
    assert item["obs"]["state"].shape == (2, 3) and item["obs"]["state"].dtype == torch.float32
    assert item["action"].shape == (4, 4) and item["action"].dtype == torch.float32


def _dp_create_indices(episode_ends, sequence_length, pad_before, pad_after) -> np.ndarray:
    """diffusion_policy's create_indices (replay_buffer sampler), loop for loop."""
    pad_before = min(max(pad_before, 0), sequence_length - 1)
    pad_after = min(max(pad_after, 0), sequence_length - 1)
    indices = []
    for i in range(len(episode_ends)):
        start_idx = 0 if i == 0 else episode_ends[i - 1]
        end_idx = episode_ends[i]
        episode_length = end_idx - start_idx
        min_start = -pad_before
        max_start = episode_length - sequence_length + pad_after
        for idx in range(min_start, max_start + 1):
            buffer_start_idx = max(idx, 0) + start_idx
            buffer_end_idx = min(idx + sequence_length, episode_length) + start_idx
            start_offset = buffer_start_idx - (idx + start_idx)
            end_offset = (idx + sequence_length + start_idx) - buffer_end_idx
            indices.append([buffer_start_idx, buffer_end_idx, start_offset, sequence_length - end_offset])
    return np.array(indices).reshape(-1, 4)


def _dp_sample_sequence(data: np.ndarray, row: np.ndarray, sequence_length: int) -> np.ndarray:
    """diffusion_policy's SequenceSampler.sample_sequence, written out the way it is there."""
    bs, be, ss, se = row
    sample = data[bs:be]
    out = sample
    if ss > 0 or se < sequence_length:
        out = np.zeros((sequence_length, *data.shape[1:]), dtype=data.dtype)
        if ss > 0:
            out[:ss] = sample[0]
        if se < sequence_length:
            out[se:] = sample[-1]
        out[ss:se] = sample
    return out


@pytest.mark.parametrize(("to", "tp", "ta"), [(1, 1, 1), (2, 16, 8), (3, 5, 5), (2, 8, 1), (4, 4, 4)])
def test_matches_diffusion_policy_sampler(make_dataset, to, tp, ta):
    lengths = (7, 1, 12, 3, 16)
    path = make_dataset(lengths=lengths, valid_fraction=0.0)
    ds = SequenceDataset(path, ["state"], n_obs_steps=to, horizon=tp, n_action_steps=ta, split="all")
    ends = np.cumsum(lengths)
    pb, pa = min(to - 1, tp - 1), min(ta - 1, tp - 1)
    assert len(ds) == sum(max(0, n - tp + pb + pa + 1) for n in lengths)
    dp_rows = _dp_create_indices(ends, tp, to - 1, ta - 1)
    np.testing.assert_array_equal(create_indices(ends, tp, to - 1, ta - 1), dp_rows)
    np.testing.assert_array_equal(ds.indices, dp_rows)
    for i, row in enumerate(dp_rows):
        act = _dp_sample_sequence(ds.actions, row, tp)
        obs = _dp_sample_sequence(ds.obs["state"], row, tp)[:to]
        item = ds[i]
        np.testing.assert_array_equal(item["action"].numpy(), act)
        np.testing.assert_array_equal(item["obs"]["state"].numpy(), obs)
        # A window never mixes episodes: every step comes from one episode (state[:, 2] is the episode id).
        assert len(set(item["obs"]["state"][:, 2].tolist())) == 1


def test_images_stay_uint8_and_batch(make_dataset):
    path = make_dataset(lengths=(6, 5), images=True, valid_fraction=0.0)
    ds = SequenceDataset(path, ["state", "image/corner2"], n_obs_steps=2, horizon=4, n_action_steps=2)
    item = ds[1]
    img = item["obs"]["image/corner2"]
    assert img.dtype == torch.uint8 and img.shape == (2, 8, 10, 3)
    assert img[:, 0, 0, 0].tolist() == [0, 1]  # frame value = 10 * ep + t
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=3, shuffle=False)))
    assert batch["obs"]["image/corner2"].shape == (3, 2, 8, 10, 3)
    assert batch["obs"]["state"].shape == (3, 2, 3) and batch["action"].shape == (3, 4, 4)
    assert ds.shape_meta == {
        "obs": {
            "state": {"shape": [3], "type": "low_dim"},
            "image/corner2": {"shape": [8, 10, 3], "type": "rgb"},
        },
        "action": {"shape": [4]},
    }


def test_splits_and_demo_limit(make_dataset):
    path = make_dataset(lengths=(4,) * 10, valid_fraction=0.3, split_seed=7)
    with open_dataset(path) as d:
        train, valid = d.split("train"), d.split("valid")
    tr = SequenceDataset(path, ["state"], 1, 2, 1, split="train")
    va = SequenceDataset(path, ["state"], 1, 2, 1, split="valid")
    al = SequenceDataset(path, ["state"], 1, 2, 1, split="all")
    assert [n for _, n in tr.demos] == train and [n for _, n in va.demos] == valid
    assert (tr.num_episodes, va.num_episodes, al.num_episodes) == (7, 3, 10)
    assert len(tr) + len(va) == len(al) == 10 * 3
    lim = SequenceDataset(path, ["state"], 1, 2, 1, split="train", demo_limit=3)
    assert [n for _, n in lim.demos] == train[:3]
    assert lim.episode_ends.tolist() == [4, 8, 12]
    episode_ids = {int(lim[i]["obs"]["state"][0, 2]) for i in range(len(lim))}
    assert episode_ids == {int(n[5:]) for n in train[:3]}
    with pytest.raises(DatasetError, match=r"demo_limit=8 but split 'train' holds only 7 demos"):
        SequenceDataset(path, ["state"], 1, 2, 1, split="train", demo_limit=8)


def test_multi_file_task_ids(make_dataset):
    a = make_dataset(lengths=(5, 3), name="a.hdf5", env_name="push-v3", valid_fraction=0.0)
    b = make_dataset(lengths=(4,), name="b.hdf5", env_name="reach-v3", valid_fraction=0.0)
    ds = SequenceDataset([a, b], ["state"], n_obs_steps=2, horizon=4, n_action_steps=2)
    assert len(ds) == 4 + 2 + 3
    assert ds.task_names == ["push-v3", "reach-v3"]
    ids = [int(ds[i]["task_id"]) for i in range(len(ds))]
    assert ids == [0] * 6 + [1] * 3
    # b's demo_0 starts fresh, padded with its own step 0
    assert ds[6]["action"][:, 0].tolist() == [0, 0, 1, 2]
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=9)))
    assert batch["task_id"].dtype == torch.long and batch["task_id"].tolist() == ids
    c = make_dataset(lengths=(4,), name="c.hdf5", action_dim=2)
    with pytest.raises(DatasetError, match="multi-file datasets must match"):
        SequenceDataset([a, c], ["state"], 2, 4, 2)


def test_stats_over_split(make_dataset):
    path = make_dataset(lengths=(5, 3, 6, 2, 4), valid_fraction=0.4)
    ds = SequenceDataset(path, ["state"], 2, 4, 2, split="train")
    stats = ds.stats()
    with open_dataset(path) as d:
        ref = d.stats(["state", "action"], split="train")
        x = np.concatenate([d.episode(n)["actions"] for n in d.split("train")]).astype(np.float64)
    for key in ("state", "action"):
        for name in ("min", "max", "mean", "std"):
            assert stats[key][name].dtype == np.float32
            np.testing.assert_allclose(stats[key][name], ref[key][name], rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["std"], x.std(0), rtol=1e-5)


def test_bad_arguments(make_dataset):
    path = make_dataset()
    with pytest.raises(DatasetError, match=r"obs key 'stat' .*did you mean 'state'"):
        SequenceDataset(path, ["stat"], 2, 4, 2)
    with pytest.raises(ValueError, match="n_obs_steps <= horizon"):
        SequenceDataset(path, ["state"], 5, 4, 2)
    with pytest.raises(DatasetError, match="no such file"):
        SequenceDataset(path.with_name("missing.hdf5"), ["state"], 2, 4, 2)
    empty = SequenceDataset(make_dataset(lengths=(4,), name="one.hdf5"), ["state"], 2, 4, 2, split="valid")
    assert len(empty) == 0
    with pytest.raises(DatasetError, match="split 'valid' holds no steps"):
        empty.stats()


def test_vectorised_batch_equals_per_item_collation(tmp_path):
    from torch.utils.data import DataLoader, default_collate

    from robosteer.policies.data import DatasetWriter, SequenceDataset

    rng = np.random.default_rng(0)
    path = tmp_path / "d.hdf5"
    with DatasetWriter(
        path, env_args={"env_name": "toy", "type": 2, "env_kwargs": {}}, valid_fraction=0.0
    ) as w:
        for length in (3, 7, 12):
            w.add_episode(
                obs={"state": rng.normal(size=(length, 5)).astype(np.float32)},
                actions=rng.normal(size=(length, 2)).astype(np.float32),
                rewards=np.zeros(length, np.float32),
                dones=np.zeros(length, np.uint8),
            )
    for to, tp, ta in ((2, 16, 8), (1, 4, 4), (3, 6, 2)):
        ds = SequenceDataset(str(path), ["state"], n_obs_steps=to, horizon=tp, n_action_steps=ta, split="all")
        idx = list(rng.permutation(len(ds))[:9])
        fast, slow = ds.get_batch(idx), default_collate([ds[i] for i in idx])
        assert torch.equal(fast["action"], slow["action"]) and torch.equal(
            fast["obs"]["state"], slow["obs"]["state"]
        )
        assert next(iter(DataLoader(ds, batch_size=4)))["action"].shape == (
            4,
            tp,
            2,
        )  # plain loaders still work


# ------------------------------------------------------------------ mutation survivors (issue 59), by behaviour
def test_create_indices_pads_nothing_unless_asked() -> None:
    """No pads given: only windows that lie wholly inside an episode (5 steps, windows of 3: starts 0, 1, 2)."""
    rows = create_indices(np.array([5]), 3)
    assert rows.tolist() == [[0, 3, 0, 3], [1, 4, 0, 3], [2, 5, 0, 3]]


def test_one_demo_is_a_valid_limit_and_what_was_loaded_is_recorded(make_dataset):
    path = make_dataset(lengths=(4, 3), valid_fraction=0.0)
    one = SequenceDataset(path, ["state"], 1, 2, 1, demo_limit=1)
    assert one.num_episodes == 1 and one.demo_limit == 1 and one.split == "train"
    with open_dataset(path) as f:
        assert one.env_args == [f.env_args] and one.env_args[0]["env_name"] == "push-v3"


def test_return_task_id_when_asked_whatever_the_file_count(make_dataset):
    a = make_dataset(lengths=(4,), name="a.hdf5", env_name="push-v3", valid_fraction=0.0)
    b = make_dataset(lengths=(4,), name="b.hdf5", env_name="reach-v3", valid_fraction=0.0)
    single = SequenceDataset(a, ["state"], 1, 2, 1, return_task_id=True)
    assert single[0]["task_id"].tolist() == 0
    both = SequenceDataset([a, b], ["state"], 1, 2, 1, return_task_id=False)
    assert "task_id" not in both[0] and "task_id" not in both.get_batch([0, 3])


def test_files_without_an_env_name_are_told_apart_by_path(make_dataset):
    """A hand-made file may lack env_args["env_name"]: each such file is its own task, named by its path."""
    paths = [make_dataset(lengths=(3,), name=f"{n}.hdf5", valid_fraction=0.0) for n in ("a", "b")]
    for p in paths:
        with h5py.File(p, "r+") as f:
            f["data"].attrs["env_args"] = json.dumps({"type": 2, "env_kwargs": {}})
    ds = SequenceDataset(paths, ["state"], 1, 2, 1)
    assert ds.task_names == [str(p) for p in paths]
    assert ds.get_batch([0, 2])["task_id"].tolist() == [0, 1]


def test_only_the_asked_obs_keys_are_read(make_dataset):
    """A NaN in a camera a state policy never reads does not stop it training (only asked keys are checked)."""
    path = make_dataset(lengths=(3, 3), images=True, valid_fraction=0.0)
    with h5py.File(path, "r+") as f:
        for demo in ("demo_0", "demo_1"):
            f[f"data/{demo}/next_obs/extra"] = np.zeros((3, 2), dtype=np.float32)
            f[f"data/{demo}/obs/extra"] = np.full((3, 2), np.nan if demo == "demo_1" else 0.0, np.float32)
    ds = SequenceDataset(path, ["state"], 1, 2, 1)
    assert set(ds.obs) == {"state"} and ds.num_episodes == 2
    with pytest.raises(DatasetError, match="extra"):
        SequenceDataset(path, ["state", "extra"], 1, 2, 1)


def test_an_empty_split_keeps_each_keys_shape_and_dtype(make_dataset):
    path = make_dataset(lengths=(4,), images=True, valid_fraction=0.0)
    empty = SequenceDataset(path, ["state", "image/corner2"], 1, 2, 1, split="valid")
    assert empty.obs["state"].shape == (0, 3) and empty.obs["state"].dtype == np.float32
    assert empty.obs["image/corner2"].shape == (0, 8, 10, 3) and empty.obs["image/corner2"].dtype == np.uint8
    assert empty.actions.shape == (0, 4) and len(empty) == 0


def test_low_dim_obs_stored_as_float64_come_out_float32(make_dataset, synthetic, tmp_path):
    path = tmp_path / "f64.hdf5"
    ep = synthetic(0, 4)
    with DatasetWriter(path, {"env_name": "push-v3"}, valid_fraction=0.0) as w:
        w.add_episode(**{**ep, "obs": {"state": ep["obs"]["state"].astype(np.float64)}})
    with open_dataset(path) as f:
        assert f.episode(0)["obs"]["state"].dtype == np.float64  # stored as given
    batch = SequenceDataset(path, ["state"], 2, 3, 1).get_batch([0, 1])
    assert batch["obs"]["state"].dtype == torch.float32 and batch["action"].dtype == torch.float32


def test_an_empty_index_list_is_an_empty_batch(make_dataset):
    ds = SequenceDataset(make_dataset(lengths=(5, 3)), ["state"], 2, 4, 2, split="all")
    batch = ds.get_batch([])
    assert batch["obs"]["state"].shape == (0, 2, 3) and batch["action"].shape == (0, 4, 4)
