"""Demonstrations → chunk transitions: hand-checked indexing, and agreement with the real chunked env."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from robosteer import sim
from robosteer.policies.data import DatasetError, DatasetWriter
from robosteer.policies.rl import chunk_transitions
from robosteer.policies.rl.offline import shaped_chunk_reward


def _write(path, episodes):
    with DatasetWriter(path, {"env_name": "reach-v3"}, valid_fraction=0.0) as w:
        for obs, dones in episodes:
            t = len(obs)
            w.add_episode(
                obs={"state": obs[:, None].astype(np.float32)},
                next_obs={"state": (obs + 1)[:, None].astype(np.float32)},
                actions=(10 * obs)[:, None].astype(np.float32),
                rewards=np.arange(t, dtype=np.float32),
                dones=np.asarray(dones, np.uint8),
            )


def test_indexing_padding_rewards_and_termination(tmp_path):
    path = tmp_path / "d.hdf5"
    obs = np.arange(5.0)  # states 0..4, final next state 5
    _write(path, [(obs, [0, 0, 0, 0, 1]), (obs, [0, 0, 0, 0, 0])])  # a success, then a time-out
    tr = chunk_transitions(path, ["state"], n_obs_steps=2, n_action_steps=2)
    assert tr["obs/state"].shape == (10, 2, 1) and tr["action"].shape == (10, 2)
    s, s2 = tr["obs/state"][:, :, 0], tr["next_obs/state"][:, :, 0]
    assert s[0].tolist() == [0, 0] and s2[0].tolist() == [1, 2]  # padded start, s' after two actions
    assert s[3].tolist() == [2, 3] and s2[3].tolist() == [4, 5]  # s' of the last chunk is the final state
    assert tr["action"][4].tolist() == [40, 40]  # a chunk cut by the episode end repeats its last action
    assert tr["reward"][:5].tolist() == [-1, -1, -1, 0, 0] and tr["done"][:5].tolist() == [0, 0, 0, 1, 1]
    assert tr["reward"][5:].tolist() == [-1] * 5 and tr["done"][5:].sum() == 0  # time-out: no terminal
    dense = chunk_transitions(path, ["state"], 2, 2, reward="dense")
    assert dense["reward"][:5].tolist() == [1, 3, 5, 7, 4]  # summed, padding not counted
    shaped = chunk_transitions(path, ["state"], 2, 2, reward="shaped", reward_scale=10.0)
    expected = [((2 * i + 1) / 10 - 2) / 2 for i in range(4)] + [(4 / 10 - 1) / 2]  # executed steps only
    assert np.allclose(shaped["reward"][:5].numpy(), expected)
    assert shaped["done"].tolist() == tr["done"].tolist()


def test_shaped_reward_is_a_cost_that_never_rewards_going_on():
    r = shaped_chunk_reward(np.array([0.0, 80.0, 10.0, 30.0]), np.array([8, 8, 1, 3]), 8, 10.0)
    assert np.allclose(r, [-1.0, 0.0, 0.0, 0.0])  # far: -1 per chunk; max reward at every executed step: 0
    assert np.all(
        shaped_chunk_reward(np.random.default_rng(0).uniform(0, 80, 50), np.full(50, 8), 8, 10.0) <= 0
    )
    with pytest.raises(ValueError, match="reward_scale"):
        shaped_chunk_reward(np.zeros(1), np.ones(1), 8, 0.0)


def test_bad_input_is_a_clear_error(tmp_path):
    path = tmp_path / "d.hdf5"
    _write(path, [(np.arange(3.0), [0, 0, 1])])
    with pytest.raises(ValueError, match=r"reward='shapd'.*shaped"):
        chunk_transitions(path, ["state"], 2, 2, reward="shapd")
    with pytest.raises(DatasetError, match="stat"):
        chunk_transitions(path, ["stat"], 2, 2)


def test_transitions_match_the_chunked_env_replaying_a_demo(tmp_path):
    """The offline (s, a, r, s', done) equal what the online loop sees when the env executes the chunks."""
    from robosteer.scripts.collect import collect_episode

    to, ta, seed = 2, 4, 3
    cfg = OmegaConf.create({"random_segment_prob": 0.0, "action_noise_std": 0.0})
    with sim.make_env("reach-v3", num_envs=1, seed=seed, terminate_on_success=True) as env:
        ep = collect_episode(env, sim.ScriptedExpert("reach-v3"), seed, cfg)
    assert ep["dones"][-1] == 1  # the expert succeeded: the last chunk is terminal
    path = tmp_path / "d.hdf5"
    with DatasetWriter(path, {"env_name": "reach-v3"}, valid_fraction=0.0) as w:
        w.add_episode(ep["obs"], ep["actions"], ep["rewards"], ep["dones"], next_obs=ep["next_obs"])
    tr = chunk_transitions(path, ["state"], to, ta)
    shaped = chunk_transitions(path, ["state"], to, ta, reward="shaped")
    with sim.make_env(
        "reach-v3", num_envs=1, seed=seed, action_chunk=ta, obs_history=to, terminate_on_success=True
    ) as env:
        obs = env.reset(seed=[seed])
        for i, start in enumerate(range(0, len(ep["actions"]), ta)):
            assert torch.equal(tr["obs/state"][start], torch.as_tensor(obs["state"][0]))
            chunk = tr["action"][start].reshape(1, ta, -1).numpy()
            obs, reward, terminated, _, info = env.step(chunk)
            final = info["final_obs"]["state"][0] if terminated[0] else obs["state"][0]
            assert torch.equal(tr["next_obs/state"][start], torch.as_tensor(final)), f"chunk {i}"
            assert tr["done"][start] == float(terminated[0])
            assert tr["reward"][start] == (0.0 if info["success"][0] else -1.0)
            online = shaped_chunk_reward(reward, info["steps_executed"], ta, 10.0)  # what the loop stores
            assert shaped["reward"][start].item() == pytest.approx(float(online[0]), abs=1e-5)
            if terminated[0]:
                break
    assert terminated[0]
