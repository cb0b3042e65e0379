"""The edges of demonstrations → chunk transitions that the by-hand episode does not reach (issue 59's
mutation survivors): the time-out tail's reward, dtypes and float32 sums, stride longer than a chunk,
several keys through an obs transform, the options chunk_transitions passes on, and which field is missing."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from robosteer.policies.data import DatasetError, DatasetWriter
from robosteer.policies.rl.offline import (
    _mc_returns,
    chunk_transitions,
    episode_transitions,
    shaped_chunk_reward,
)


def _episode(rewards: list[float], dones: list[int], dtype: type = np.float64) -> dict:
    """T steps of two keys: state s_t = [t], goal g_t = [100 + t]; action a_t = [t]."""
    t = np.arange(float(len(rewards)))
    return {
        "obs": {"state": t[:, None], "goal": 100 + t[:, None]},
        "next_obs": None,
        "actions": t[:, None],
        "rewards": np.asarray(rewards, dtype=dtype),
        "dones": np.asarray(dones),
    }


def _write(path, demos: int = 3, t: int = 4) -> None:
    """``demos`` time-outs of ``t`` steps; demo i's states are 10 i + step."""
    with DatasetWriter(path, {"env_name": "reach-v3"}, valid_fraction=0.0) as w:
        for i in range(demos):
            obs = (10.0 * i + np.arange(t, dtype=np.float32))[:, None]
            w.add_episode(
                obs={"state": obs}, next_obs={"state": obs + 1}, actions=obs,
                rewards=np.ones(t, np.float32), dones=np.zeros(t, np.uint8),
            )  # fmt: skip


def test_a_time_out_repeats_its_last_chunk_reward_not_another() -> None:
    """r = [1, 2, 4], γ = ½, not terminated: the tail is r_last/(1−γ) = 8, so R = [4, 6, 8]."""
    out = _mc_returns(np.array([1.0, 2.0, 4.0]), 1, 0.5, terminated=False)
    assert out.tolist() == [4.0, 6.0, 8.0] and out.dtype == np.float32


def test_fields_are_float32_and_float32_rewards_are_summed_in_float64() -> None:
    """1e8 + 1 − 1e8 is 0 in float32 and 1 in float64: the chunk's dense reward is summed in float64."""
    out = episode_transitions(
        _episode([1e8, 1.0, -1e8], [0, 0, 0], np.float32), ["state"], 1, 3, "dense", discount=0.5
    )
    assert out["reward"][0] == 1.0
    for key in ("reward", "done", "mc_return", "action", "obs/state", "next_obs/state"):
        assert out[key].dtype == np.float32, key


def test_shaped_reward_divides_in_float64_and_takes_any_positive_scale() -> None:
    """float32 input: 1/3 is computed in float64 (float32's 1/3 is off by 1e-8); a scale below 1 is valid."""
    got = shaped_chunk_reward(np.array([1.0], np.float32), np.array([3]), 3, 3.0)
    assert got.dtype == np.float64 and got[0] == (1.0 / 3.0 - 3.0) / 3.0
    assert shaped_chunk_reward(np.array([0.5]), np.array([1]), 1, 0.5).tolist() == [0.0]
    default = episode_transitions(_episode([5.0, 10.0], [0, 0]), ["state"], 1, 1, "shaped")
    assert default["reward"].tolist() == [-0.5, 0.0]  # reward_scale defaults to Meta-World's 10


def test_a_stride_longer_than_the_chunk_chains_returns_chunk_to_chunk() -> None:
    """Ta = 1, stride = 2: chunks at 0, 2, 4, each return discounting the next chunk's (not the one after)."""
    out = episode_transitions(
        _episode([1.0] * 5, [0, 0, 0, 0, 1]), ["state"], 1, 1, "dense", discount=0.5, stride=2
    )
    assert out["obs/state"][:, 0, 0].tolist() == [0, 2, 4]
    assert out["mc_return"].tolist() == [1.0 + 0.5 * (1.0 + 0.5 * 1.0), 1.0 + 0.5 * 1.0, 1.0]


def test_an_obs_transform_sees_every_key() -> None:
    seen = []

    def transform(windows: dict) -> dict:
        seen.append(sorted(windows))
        return {"both": windows["state"][:, -1, 0] + windows["goal"][:, -1, 0]}  # (T+1,)

    out = episode_transitions(_episode([1.0, 1.0], [0, 0]), ["state", "goal"], 2, 1, obs_transform=transform)
    assert seen == [["goal", "state"]] and out["obs/both"].tolist() == [100.0, 102.0]


def test_chunk_transitions_passes_on_its_options(tmp_path) -> None:
    path = tmp_path / "d.hdf5"
    _write(path)
    everything = chunk_transitions(path, ["state"], 1, 1)
    first = chunk_transitions(path, ["state"], 1, 1, demo_limit=1)
    assert len(everything["reward"]) == 12 and first["obs/state"][:, 0, 0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="demo_limit"):
        chunk_transitions(path, ["state"], 1, 1, demo_limit=0)
    both = chunk_transitions(
        path, ["state"], 1, 1, "dense", discount=0.5, obs_transform=lambda w: {"x": w["state"][:, -1]}
    )
    assert both["mc_return"][3] == pytest.approx(2.0) and both["obs/x"][:4, 0].tolist() == [0, 1, 2, 3]
    for n_obs, n_act in ((0, 2), (2, 0)):
        with pytest.raises(ValueError, match="n_obs_steps and n_action_steps"):
            chunk_transitions(path, ["state"], n_obs, n_act)


@pytest.mark.parametrize("field, reward", [("dones", "sparse"), ("rewards", "dense")])
def test_a_demo_missing_a_field_names_it_and_sparse_needs_no_rewards(
    tmp_path, field: str, reward: str
) -> None:
    path = tmp_path / "d.hdf5"
    _write(path, demos=1)
    with h5py.File(path, "a") as f:
        del f[f"data/demo_0/{field}"]
    with pytest.raises(DatasetError, match=f"data/demo_0 has no '{field}'"):
        chunk_transitions(path, ["state"], 1, 2, reward)
    if field == "rewards":
        assert chunk_transitions(path, ["state"], 1, 2, "sparse")["reward"].tolist() == [-1.0] * 4


def test_only_the_asked_keys_are_read(tmp_path) -> None:
    """A key the critic does not use is not read (nor deep-checked): a NaN there does not stop the others."""
    path = tmp_path / "d.hdf5"
    _write(path, demos=1)
    with h5py.File(path, "a") as f:
        for part in ("obs", "next_obs"):
            f[f"data/demo_0/{part}/unused"] = np.full((4, 2), np.nan, np.float32)
    assert chunk_transitions(path, ["state"], 1, 1)["obs/state"].shape == (4, 1, 1)
