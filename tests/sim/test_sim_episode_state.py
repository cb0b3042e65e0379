"""The episode in flight as data: a replayed episode continues exactly as the uninterrupted one does."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer import sim
from robosteer.policies.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")

KW = dict(num_envs=2, seed=3, action_chunk=4, obs_history=2, max_episode_steps=20)


def _chunks(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (2, 4, 4)).astype(np.float32) for _ in range(n)]


def _continue(env: sim.BatchedEnv, obs: dict, chunks: list[np.ndarray]) -> list[tuple]:
    """Observations, rewards, ends and episode seeds of ``chunks`` played from ``obs``."""
    out = [(obs["state"].copy(),)]
    for chunk in chunks:
        obs, reward, terminated, truncated, info = env.step(chunk)
        out.append((obs["state"].copy(), reward, terminated, truncated, info["episode_seed"].copy()))
    return out


@pytest.mark.parametrize("randomization", [None, {"action_noise_std": 0.05, "latency_s": 0.0125}])
def test_restored_episodes_continue_exactly_through_auto_resets(tmp_path, randomization):
    """Stop mid-episode (env 0 has auto-reset once: its episode came from the seed stream), store the states
    in a checkpoint, rebuild them in a new env: the next 12 chunks (past two more auto-resets) are identical."""
    first, rest = _chunks(7, 0), _chunks(12, 1)
    with sim.make_env("push-v3", randomization=randomization, **KW) as env:
        obs = env.reset(seed=3)
        for chunk in first:  # 28 steps: every env is in its second 20-step episode
            obs, *_ = env.step(chunk)
        states = env.episode_states()
        want = _continue(env, obs, rest)
    assert [len(s["actions"]) for s in states] == [2, 2] and states[0]["actions"].shape == (2, 4, 4)
    # through the checkpoint format (JSON + tensors)
    save_checkpoint(tmp_path / "ck", {}, {}, {"envs": states})
    stored = load_checkpoint(tmp_path / "ck").extra["envs"]
    with sim.make_env("push-v3", randomization=randomization, **{**KW, "seed": 99}) as env:
        obs = env.restore_episodes(stored)
        assert obs is not None and env.episode_seeds.tolist() == [s["seed"] for s in states]
        got = _continue(env, obs, rest)
    assert any(t[2].any() or t[3].any() for t in want[1:])  # the continuation crosses an episode end
    for a, b in zip(want, got, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_a_fresh_episode_restores_from_its_first_observation():
    with sim.make_env("reach-v3", **KW) as env:
        obs = env.reset(seed=5)
        states = env.episode_states()
        assert states[0]["actions"].shape == (0, 4, 4)
    with sim.make_env("reach-v3", **KW) as env:
        got = env.restore_episodes(states)
    assert got is not None
    np.testing.assert_array_equal(got["state"], obs["state"])


def test_a_replay_that_does_not_reproduce_the_episode_is_refused():
    """Another task (or simulator build) replays the actions into other observations: None, not a wrong state."""
    with sim.make_env("reach-v3", **KW) as env:
        env.reset(seed=5)
        env.step(_chunks(1, 0)[0])
        states = env.episode_states()
    with sim.make_env("push-v3", **KW) as env:
        assert env.restore_episodes(states) is None
    with sim.make_env("reach-v3", **{**KW, "num_envs": 3}) as env:
        assert env.restore_episodes(states) is None
