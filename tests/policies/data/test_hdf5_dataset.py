"""DatasetWriter / open_dataset: robomimic layout, round trip, splits, and nothing lost on interruption."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from robosteer.policies.data import DatasetError, DatasetWriter, SequenceDataset, open_dataset, split_names
from robosteer.policies.data.hdf5 import obs_key, stored_key

REPO = Path(__file__).resolve().parents[3]
ENV = {"env_name": "push-v3", "type": 2, "env_kwargs": {"obs": "state+image"}}
NESTED = REPO / "tests" / "fixtures" / "nested_images"  # written by the writer before flat image keys


def test_layout_matches_robomimic(make_dataset):
    path = make_dataset(lengths=(5, 3, 4), images=True)
    with h5py.File(path, "r") as f:
        data = f["data"]
        assert json.loads(data.attrs["env_args"]) == {
            "env_name": "push-v3",
            "type": 2,
            "env_kwargs": {"obs": "state"},
        }
        assert int(data.attrs["total"]) == 12
        assert sorted(data.keys()) == ["demo_0", "demo_1", "demo_2"]
        demo = data["demo_1"]
        assert int(demo.attrs["num_samples"]) == 3
        assert set(demo.keys()) == {"obs", "next_obs", "actions", "rewards", "dones", "states"}
        # camera image/corner2 at robomimic's flat obs/corner2_image, a dataset of its own
        assert sorted(demo["obs"]) == sorted(demo["next_obs"]) == ["corner2_image", "state"]
        img = demo["obs/corner2_image"]
        assert img.dtype == np.uint8 and img.shape == (3, 8, 10, 3)
        assert img.compression == "gzip" and img.chunks is not None
        assert demo["obs/state"].compression is None
        assert demo["actions"].shape == (3, 4) and demo["states"].shape == (3, 5)
        assert demo.attrs["seed"] == 1001 and not bool(demo.attrs["success"])
        assert f["mask/train"].dtype.kind == "S"  # byte strings, robomimic convention
        train = [x.decode() for x in f["mask/train"][()]]
        valid = [x.decode() for x in f["mask/valid"][()]]
        assert sorted(train + valid) == ["demo_0", "demo_1", "demo_2"]
    assert not path.with_name(path.name + ".partial").exists()


def test_round_trip_and_derived_next_obs(tmp_path, synthetic):
    path = tmp_path / "d.hdf5"
    eps = [synthetic(i, n, images=True) for i, n in enumerate((4, 6))]
    explicit_next = {k: v + 1 for k, v in eps[1]["obs"].items()}
    with DatasetWriter(path, ENV, attrs={"collector": "test", "meta": {"a": 1}}) as w:
        assert w.add_episode(**eps[0]) == "demo_0"
        assert w.add_episode(**eps[1], next_obs=explicit_next) == "demo_1"
        assert (w.num_episodes, w.total_steps) == (2, 10)
    with open_dataset(path) as d:
        assert d.num_episodes == 2 and d.total_steps == 10 and d.action_dim == 4
        assert d.obs_keys == ["image/corner2", "state"]
        assert d.obs_shapes == {"image/corner2": ((8, 10, 3), "uint8"), "state": ((3,), "float32")}
        assert d.env_args == ENV
        assert d.attrs["collector"] == "test" and json.loads(d.attrs["meta"]) == {"a": 1}
        for i, ep in enumerate(eps):
            got = d.episode(i)
            assert got["name"] == f"demo_{i}"
            for k in ep["obs"]:
                np.testing.assert_array_equal(got["obs"][k], ep["obs"][k])
            np.testing.assert_array_equal(got["actions"], ep["actions"])
            np.testing.assert_array_equal(got["rewards"], ep["rewards"])
            np.testing.assert_array_equal(got["dones"], ep["dones"])
            np.testing.assert_array_equal(got["states"], ep["states"])
            assert got["attrs"] == {"num_samples": len(ep["actions"]), **ep["attrs"]}
        # Derived next_obs: shifted by one, last step repeated.
        nxt = d.episode("demo_0")["next_obs"]["state"]
        s = eps[0]["obs"]["state"]
        np.testing.assert_array_equal(nxt[:-1], s[1:])
        np.testing.assert_array_equal(nxt[-1], s[-1])
        np.testing.assert_array_equal(
            d.episode(1)["next_obs"]["image/corner2"], explicit_next["image/corner2"]
        )
        only_state = d.episode(-1, obs_keys=["state"])
        assert list(only_state["obs"]) == ["state"] and only_state["name"] == "demo_1"


def test_summary_and_splits(make_dataset):
    path = make_dataset(lengths=(5, 3, 4, 6, 2, 5, 5, 3, 4, 3), valid_fraction=0.2, split_seed=3)
    with open_dataset(path) as d:
        s = d.summary()
        assert s["episodes"] == 10 and s["steps"] == 40 and s["mean_length"] == pytest.approx(4.0)
        assert s["success_rate"] == pytest.approx(0.5)  # even episodes succeed
        assert s["splits"] == {"train": 8, "valid": 2}
        train, valid = d.split("train"), d.split("valid")
        assert sorted(train + valid, key=lambda n: int(n[5:])) == d.demo_names == d.split("all")
        assert not set(train) & set(valid)
        with pytest.raises(DatasetError, match=r"mask/trian.*'train'"):
            d.split("trian")


def test_split_is_deterministic_under_seed():
    names = [f"demo_{i}" for i in range(20)]
    a = split_names(names, 0.25, seed=0)
    assert a == split_names(list(reversed(names)), 0.25, seed=0)
    assert len(a[1]) == 5 and len(a[0]) == 15
    assert split_names(names, 0.25, seed=1)[1] != a[1]
    assert split_names(names[:1], 0.5, seed=0) == (["demo_0"], [])  # int(0.5 * 1) = 0: train never empty


def test_keyboard_interrupt_in_with_block_keeps_finished_episodes(tmp_path, synthetic):
    path = tmp_path / "d.hdf5"
    with pytest.raises(KeyboardInterrupt), DatasetWriter(path, ENV, valid_fraction=0.5) as w:
        for ep in range(3):
            w.add_episode(**synthetic(ep, 4 + ep))
        raise KeyboardInterrupt  # e.g. Ctrl-C while the env steps through episode 4
    with open_dataset(path) as d:
        assert d.num_episodes == 3 and d.total_steps == 4 + 5 + 6
        assert d.split("valid") and sorted(d.split("train") + d.split("valid")) == d.demo_names
    assert not path.with_name("d.hdf5.partial").exists()


def test_interrupt_inside_add_episode_drops_only_that_episode(tmp_path, synthetic, monkeypatch):
    path = tmp_path / "d.hdf5"
    real_write = DatasetWriter._write
    calls = {"n": 0}

    def flaky_write(self, group, name, arr):
        calls["n"] += 1
        if group.name == "/data/demo_2" and name == "actions":  # obs already written for this episode
            raise KeyboardInterrupt
        real_write(self, group, name, arr)

    monkeypatch.setattr(DatasetWriter, "_write", flaky_write)
    with pytest.raises(KeyboardInterrupt), DatasetWriter(path, ENV) as w:
        for ep in range(4):
            w.add_episode(**synthetic(ep, 3))
    assert calls["n"] > 0
    with open_dataset(path) as d:
        assert d.demo_names == ["demo_0", "demo_1"] and d.total_steps == 6


def test_file_is_valid_after_every_episode_even_after_a_hard_kill(tmp_path):
    """A SIGKILL-like exit (no close, no atexit) leaves demos.hdf5.partial readable with every finished episode."""
    path = tmp_path / "d.hdf5"
    code = textwrap.dedent(
        f"""
        import os, numpy as np
        from robosteer.policies.data import DatasetWriter
        w = DatasetWriter({str(path)!r}, {{"env_name": "push-v3"}})
        for ep in range(3):
            T = 4 + ep
            w.add_episode({{"state": np.full((T, 3), ep, np.float32)}}, np.zeros((T, 4)), np.zeros(T), np.zeros(T))
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)
    partial = path.with_name("d.hdf5.partial")
    assert partial.exists() and not path.exists()
    with pytest.raises(DatasetError, match=r"d\.hdf5\.partial exists: an interrupted collection"):
        open_dataset(path)
    with open_dataset(partial) as d:
        assert d.num_episodes == 3 and d.total_steps == 15
        np.testing.assert_array_equal(d.episode(2)["obs"]["state"], np.full((6, 3), 2, np.float32))


def test_writer_rejects_inconsistent_episodes(tmp_path, synthetic):
    with DatasetWriter(tmp_path / "d.hdf5", ENV) as w:
        w.add_episode(**synthetic(0, 4))
        bad = synthetic(1, 4)
        bad["rewards"] = np.zeros(3)
        with pytest.raises(DatasetError, match=r"rewards must be \(4,\)"):
            w.add_episode(**bad)
        bad = synthetic(1, 4)
        bad["obs"] = {"stat": bad["obs"]["state"]}
        with pytest.raises(DatasetError, match=r"missing \['state'\], unexpected \['stat'\]"):
            w.add_episode(**bad)
        bad = synthetic(1, 4)
        bad["obs"]["state"] = bad["obs"]["state"][:3]
        with pytest.raises(DatasetError, match=r"obs/state has shape \(3, 3\), expected \(4, 3\)"):
            w.add_episode(**bad)
        with pytest.raises(DatasetError, match="action dim 2 differs"):
            w.add_episode(**synthetic(1, 4, action_dim=2))
        w.add_episode(**synthetic(1, 2))  # rejected episodes left nothing behind
    with open_dataset(tmp_path / "d.hdf5") as d:
        assert d.demo_names == ["demo_0", "demo_1"] and d.lengths == {"demo_0": 4, "demo_1": 2}
    with pytest.raises(DatasetError, match="env_name"):
        DatasetWriter(tmp_path / "e.hdf5", {"type": 2})


def test_stats_match_numpy(make_dataset):
    path = make_dataset(lengths=(5, 3, 7, 2), images=True)
    with open_dataset(path) as d:
        stats = d.stats()
        assert set(stats) == {"state", "image/corner2", "action"}
        eps = [d.episode(n) for n in d.demo_names]
        for key, arrs in (
            ("state", [e["obs"]["state"] for e in eps]),
            ("image/corner2", [e["obs"]["image/corner2"] for e in eps]),
            ("action", [e["actions"] for e in eps]),
        ):
            x = np.concatenate(arrs).astype(np.float64)
            assert stats[key]["mean"].dtype == np.float32 and stats[key]["mean"].shape == x.shape[1:]
            np.testing.assert_allclose(stats[key]["mean"], x.mean(0), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(stats[key]["std"], x.std(0), rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(stats[key]["min"], x.min(0).astype(np.float32))
            np.testing.assert_array_equal(stats[key]["max"], x.max(0).astype(np.float32))
        valid = d.split("train")
        only = d.stats(["action"], split="train")["action"]
        x = np.concatenate([d.episode(n)["actions"] for n in valid])
        np.testing.assert_allclose(only["mean"], x.mean(0), rtol=1e-6)
        with pytest.raises(DatasetError, match=r"'stat'.*did you mean 'state'"):
            d.stats(["stat"])


@pytest.mark.parametrize(
    ("key", "stored"),
    [
        ("image/corner2", "corner2_image"),
        ("image/robot0_eye_in_hand", "robot0_eye_in_hand_image"),
        ("image/wrist_image", "wrist_image_image"),  # a camera whose name ends in _image round-trips too
        ("state", "state"),
        ("image", "image"),  # no camera: as is
        ("image/", "image/"),  # an empty camera name: as is
        ("image/a/b", "image/a/b"),  # a deeper path is not a camera: as is
        ("imagery", "imagery"),
        ("proprio/joints", "proprio/joints"),
    ],
)
def test_image_keys_are_stored_flat_and_read_back(key, stored):
    assert stored_key(key) == stored and obs_key(stored) == key


def test_keys_of_the_older_nested_layout_read_as_they_are():
    assert obs_key("image/corner2") == "image/corner2" and obs_key("_image") == "_image"
    assert obs_key("a/b_image") == "a/b_image"  # a nested path is not a flat camera key


def test_writer_refuses_a_key_that_would_read_back_as_a_camera(tmp_path, synthetic):
    ep = synthetic(0, 3)
    ep["obs"]["goal_image"] = ep["obs"].pop("state")
    with DatasetWriter(tmp_path / "d.hdf5", ENV) as w:
        with pytest.raises(DatasetError) as info:
            w.add_episode(**ep)
        assert w.num_episodes == 0
    msg = str(info.value)
    assert (
        "obs key 'goal_image' would read back as 'image/goal'" in msg and "name a camera 'image/goal'" in msg
    )


def _load_fixture_maker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_nested_fixture", NESTED / "make_fixture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_old_nested_file_reads_with_the_same_keys_and_values(tmp_path):
    """A file the old writer wrote (obs/image/<camera>) reads as before; written again, it comes out flat."""
    maker = _load_fixture_maker()
    with open_dataset(NESTED / "nested.hdf5") as d:
        assert d.image_layout == "nested" and d.summary()["image_layout"] == "nested"
        assert d.obs_keys == ["image/a", "image/b", "state"]
        assert d.obs_paths == {"image/a": "image/a", "image/b": "image/b", "state": "state"}
        eps = [d.episode(i) for i in range(d.num_episodes)]
    with DatasetWriter(tmp_path / "flat.hdf5", ENV) as w:
        for i, (ep, length) in enumerate(zip(eps, (4, 3))):
            want = maker.episode(i, length)
            for k, v in want["obs"].items():
                np.testing.assert_array_equal(ep["obs"][k], v)
            np.testing.assert_array_equal(ep["actions"], want["actions"])
            w.add_episode(ep["obs"], ep["actions"], ep["rewards"], ep["dones"], ep["next_obs"])
    with open_dataset(tmp_path / "flat.hdf5") as d:
        assert d.image_layout == "flat"
        assert d.obs_paths == {"image/a": "a_image", "image/b": "b_image", "state": "state"}
        for ep, again in zip(eps, d.episodes()):
            for k in ep["obs"]:
                np.testing.assert_array_equal(again["obs"][k], ep["obs"][k])
                np.testing.assert_array_equal(again["next_obs"][k], ep["next_obs"][k])
    old = SequenceDataset(
        NESTED / "nested.hdf5", ["image/a", "image/b"], n_obs_steps=1, horizon=2, n_action_steps=1
    )
    new = SequenceDataset(
        tmp_path / "flat.hdf5", ["image/a", "image/b"], n_obs_steps=1, horizon=2, n_action_steps=1
    )
    assert len(old) == len(new) == 5  # the windows of 4 + 3 steps
    for i in range(len(old)):
        for k in ("image/a", "image/b"):
            assert old[i]["obs"][k].equal(new[i]["obs"][k])


def test_layout_of_state_only_and_mixed_files(make_dataset):
    with open_dataset(make_dataset(images=False)) as d:
        assert d.image_layout == "none" and d.obs_paths == {"state": "state"}
    path = make_dataset(images=True)
    with open_dataset(path) as d:
        assert d.image_layout == "flat"
        want = [e["obs"]["image/corner2"] for e in d.episodes()]
    with h5py.File(path, "a") as f:  # one demo's camera moved to the old nested path
        f["data/demo_1/obs"].move("corner2_image", "image/corner2")
    with open_dataset(path) as d:
        assert d.image_layout == "flat"  # the first demo's layout
        for ep, frames in zip(d.episodes(), want):
            np.testing.assert_array_equal(ep["obs"]["image/corner2"], frames)
    with h5py.File(path, "a") as f:
        f["data/demo_0/obs/state_image"] = f["data/demo_0/obs/corner2_image"][()]
        f["data/demo_1/obs/state_image"] = f["data/demo_1/obs/image/corner2"][()]
        f["data/demo_0/next_obs/state_image"] = f["data/demo_0/next_obs/corner2_image"][()]
        f["data/demo_1/next_obs/state_image"] = f["data/demo_1/next_obs/corner2_image"][()]
        f["data/demo_0/obs"].move("corner2_image", "image/corner2")
    with open_dataset(path) as d:  # image/corner2 nested, image/state flat
        assert d.image_layout == "mixed" and d.obs_keys == ["image/corner2", "image/state", "state"]


# ------------------------------------------------------------------------------------------- interventions
INTERVENED = np.array([0, 1, 1, 0, 0], dtype=np.uint8)  # demo_0: the person held the arm for steps 1 and 2


def _write_interventions(path: Path, synthetic) -> Path:
    """demo_0 (5 steps) records interventions; demo_1 (3 steps) records none."""
    with DatasetWriter(path, ENV) as w:
        w.add_episode(**synthetic(0, 5), interventions=INTERVENED)
        w.add_episode(**synthetic(1, 3))
    return path


def test_interventions_round_trip_and_stay_optional(tmp_path, synthetic):
    path = _write_interventions(tmp_path / "d.hdf5", synthetic)
    with h5py.File(path, "r") as f:
        stored = f["data/demo_0/interventions"]
        assert stored.dtype == np.uint8 and stored.shape == (5,)  # as dones
        assert stored[()].tolist() == [0, 1, 1, 0, 0]
        assert "interventions" not in f["data/demo_1"]  # an episode without them is written as before
    with open_dataset(path) as d:
        d.deep_check()
        assert d.intervention_demos == ["demo_0"]
        got = d.episode(0)["interventions"]
        assert got.dtype == np.bool_ and got.tolist() == [False, True, True, False, False]
        assert d.episode("demo_1")["interventions"] is None
    with DatasetWriter(tmp_path / "b.hdf5", ENV) as w:  # bool flags are accepted too
        w.add_episode(**synthetic(0, 3), interventions=np.array([True, False, True]))
    with open_dataset(tmp_path / "b.hdf5") as d:
        assert d.episode(0)["interventions"].tolist() == [True, False, True]
    with DatasetWriter(tmp_path / "plain.hdf5", ENV) as w:  # a file with none at all
        w.add_episode(**synthetic(0, 2))
    with open_dataset(tmp_path / "plain.hdf5") as d:
        assert d.intervention_demos == [] and d.episode(0)["interventions"] is None


def test_writer_refuses_bad_interventions(tmp_path, synthetic):
    path = tmp_path / "d.hdf5"
    with DatasetWriter(path, ENV) as w:
        for flags, want in (
            (np.zeros(4), r"d\.hdf5 \(episode 0\): interventions must be \(5,\), got shape \(4,\)"),
            (np.zeros((5, 1)), r"interventions must be \(5,\), got shape \(5, 1\)"),
            (
                np.array([0, 1, 2, 0, 0]),
                r"demo_0/interventions holds an out-of-range value at step 2.*0 or 1",
            ),
        ):
            with pytest.raises(DatasetError, match=want) as err:
                w.add_episode(**synthetic(0, 5), interventions=flags)
            assert "\n" not in str(err.value)
        assert w.num_episodes == 0  # nothing of the refused episodes was written
    with open_dataset(path) as d:
        assert d.num_episodes == 0


def test_reader_checks_interventions(tmp_path, synthetic):
    path = _write_interventions(tmp_path / "d.hdf5", synthetic)
    with h5py.File(path, "a") as f:
        del f["data/demo_0/interventions"]
        f["data/demo_0/interventions"] = np.zeros(4, np.uint8)
    with pytest.raises(DatasetError, match=r"data/demo_0/interventions has shape \(4,\), expected \(5,\)"):
        open_dataset(path)
    with h5py.File(path, "a") as f:
        del f["data/demo_0/interventions"]
        f["data/demo_0/interventions"] = np.array([0, 1, 3, 0, 0], np.uint8)
    bad_value = r"demo_0/interventions holds an out-of-range value at step 2"
    with open_dataset(path) as d, pytest.raises(DatasetError, match=bad_value):
        d.episode(0)  # the structure is fine; the value fails when the episode is read
