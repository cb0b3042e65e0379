"""episode_transitions and the Monte-Carlo returns by hand on one small episode whose steps, dimensions and
keys all differ: termination inside the episode, padding, stride, next_obs or not, an obs transform."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer.policies.rl.offline import _mc_returns, episode_transitions


def _episode(dones: list[int], next_obs: bool = True) -> dict:
    """T = 5 steps: state s_t = [t, 100 + t], next state [t + 0.5, 200 + t], action a_t = [10 t, −t], r_t = t + 1."""
    t = np.arange(5.0)
    return {
        "obs": {"state": np.stack([t, 100 + t], 1)},
        "next_obs": {"state": np.stack([t + 0.5, 200 + t], 1)} if next_obs else None,
        "actions": np.stack([10 * t, -t], 1),
        "rewards": t + 1,
        "dones": np.asarray(dones),
    }


def test_terminated_episode_every_field_by_hand() -> None:
    """Success at step 3 (step 4 never ran): chunks start at 0..3, Ta = 3, To = 2."""
    out = episode_transitions(_episode([0, 0, 0, 1, 0]), ["state"], 2, 3, reward="dense", discount=0.5)
    s = lambda i: [i, 100 + i]  # noqa: E731
    final = [3.5, 203.0]  # next_obs of the terminal step
    assert out["obs/state"].tolist() == [[s(0), s(0)], [s(0), s(1)], [s(1), s(2)], [s(2), s(3)]]
    assert out["next_obs/state"].tolist() == [[s(2), s(3)], [s(3), final], [s(3), final], [s(3), final]]
    a = lambda i: [10 * i, -i]  # noqa: E731
    assert out["action"].tolist() == [
        [*a(0), *a(1), *a(2)],
        [*a(1), *a(2), *a(3)],
        [*a(2), *a(3), *a(3)],  # cut by the termination: padded with the last executed action
        [*a(3), *a(3), *a(3)],
    ]
    assert out["reward"].tolist() == [6.0, 9.0, 7.0, 4.0]  # executed steps only
    assert out["done"].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert out["mc_return"].tolist() == [6.0 + 0.5 * 4.0, 9.0, 7.0, 4.0]  # R_t = r_t + γ R_{t+3}; 0 after
    assert out["obs/state"].dtype == np.float32 and out["action"].dtype == np.float32
    sparse = episode_transitions(_episode([0, 0, 0, 1, 0]), ["state"], 2, 3)
    assert sparse["reward"].tolist() == [-1.0, 0.0, 0.0, 0.0] and "mc_return" not in sparse
    shaped = episode_transitions(_episode([0, 0, 0, 1, 0]), ["state"], 2, 3, "shaped", reward_scale=10.0)
    want = [(0.6 - 3) / 3, (0.9 - 3) / 3, (0.7 - 2) / 3, (0.4 - 1) / 3]
    np.testing.assert_allclose(shaped["reward"], want, rtol=1e-6)


def test_time_out_keeps_every_step_and_its_last_reward_forever() -> None:
    out = episode_transitions(_episode([0] * 5, next_obs=False), ["state"], 1, 2, "dense", discount=0.5)
    assert out["done"].tolist() == [0.0] * 5 and out["reward"].tolist() == [3.0, 5.0, 7.0, 9.0, 5.0]
    assert out["next_obs/state"][:, 0].tolist() == [[2, 102], [3, 103], [4, 104], [4, 104], [4, 104]]
    tail = 5.0 / (1 - 0.5)  # the last chunk reward, forever
    r4 = 5.0 + 0.5 * tail
    r3 = 9.0 + 0.5 * tail
    want = [3.0 + 0.5 * (7.0 + 0.5 * r4), 5.0 + 0.5 * r3, 7.0 + 0.5 * r4, r3, r4]
    np.testing.assert_allclose(out["mc_return"], want, rtol=1e-6)


def test_stride_starts_a_chunk_every_stride_steps() -> None:
    """stride = Ta = 3: chunks at 0 and 3; the returns chain chunk to chunk (stride 1 in chunk units)."""
    ep = _episode([0, 0, 0, 1, 0])
    out = episode_transitions(ep, ["state"], 1, 3, reward="dense", discount=0.5, stride=3)
    assert out["obs/state"][:, 0].tolist() == [[0, 100], [3, 103]]
    assert out["reward"].tolist() == [6.0, 4.0] and out["done"].tolist() == [0.0, 1.0]
    assert out["mc_return"].tolist() == [6.0 + 0.5 * 4.0, 4.0]


def test_obs_transform_sees_raw_windows_of_every_state_once() -> None:
    ep = _episode([0, 0, 1, 0, 0])
    ep["obs"]["state"] = ep["obs"]["state"].astype(np.uint8)
    ep["next_obs"]["state"] = np.array([[7, 8]] * 5, np.uint8)
    seen = []

    def transform(windows: dict) -> dict:
        seen.append(windows)
        return {"emb": windows["state"].astype(np.float32).sum(axis=(1, 2))}  # (T+1,)

    out = episode_transitions(ep, ["state"], 2, 2, obs_transform=transform)
    (w,) = seen
    assert w["state"].dtype == np.uint8 and w["state"].shape == (4, 2, 2)  # t_len + 1 states, To = 2
    sums = [200, 202, 206, 2 + 102 + 7 + 8]  # windows ending at states 0, 1, 2 and the final next state
    assert out["obs/emb"].tolist() == [sums[0], sums[1], sums[2]]
    assert out["next_obs/emb"].tolist() == [sums[2], sums[3], sums[3]]
    assert "obs/state" not in out


def test_mc_returns_refuse_a_discount_outside_zero_one() -> None:
    assert _mc_returns(np.array([1.0, 2.0]), 1, 0.0, terminated=True).tolist() == [1.0, 2.0]
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="discount"):
            _mc_returns(np.array([1.0]), 1, bad, terminated=True)
