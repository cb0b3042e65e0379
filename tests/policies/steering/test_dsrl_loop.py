"""DSRL's online loop with a real diffusion policy on a real chunked env: frozen base, files, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from policy_testkit import tiny_steering_base

from robosteer import sim
from robosteer.policies.checkpoint import state_dict_hash
from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, DSRLRunConfig, SteeredPolicy, run_dsrl

torch.set_num_threads(1)
TO, TA = 2, 4


def _base():
    return tiny_steering_base(to=TO, tp=8, ta=TA)


def _agent(base, variant="na"):
    bank = {"noise_critic_samples": 4, "noise_bank": 64} if variant == "na-bank" else {}
    variant = variant.removesuffix("-bank")
    cfg = DSRLConfig(variant=variant, hidden=[32, 32], batch_size=16, noise_critic_steps=1, **bank)
    return DSRL(base, obs_dim=TO * 39, exec_slice=slice(TO - 1, TO - 1 + TA), config=cfg)


def _eval_fn(policy):
    with sim.make_env("reach-v3", num_envs=2, seed=5, max_episode_steps=20) as env:
        return sim.evaluate(env, policy, episodes=2, seed=5, progress=False)


@pytest.mark.parametrize("variant", ["na", "sac", "na-bank"])
def test_loop_trains_without_touching_the_base_and_resumes(tmp_path, variant):
    base = _base()
    before = state_dict_hash(base)
    agent = _agent(base, variant)
    run = DSRLRunConfig(
        env_steps=120,
        warmup_chunks=8,
        eval_every=60,
        eval_episodes=2,
        checkpoint_every=60,
        log_every=40,
        progress=False,
    )
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=20
    ) as env:
        m = run_dsrl(agent, env, run, str(tmp_path), eval_fn=_eval_fn)
    assert state_dict_hash(base) == before
    assert m["env_steps"] >= 120 and m["updates"] > 0 and m["train_episodes"] >= 4  # 20-step episodes ended
    assert m["history"][0]["env_steps"] == 0.0 and len(m["history"]) >= 3
    cfg = json.loads((tmp_path / "checkpoints" / "latest" / "config.json").read_text())
    assert cfg["kind"] == "dsrl" and cfg["dsrl"]["variant"] == variant.removesuffix("-bank")
    n_first = 0
    if variant == "na-bank":  # the bank is filled by every transition (warm-up included)
        from robosteer.policies.checkpoint import load_checkpoint

        n_first = int(load_checkpoint(tmp_path / "checkpoints" / "latest").modules["buffer"]["size"])
        assert len(agent.bank) == n_first < 64

    resumed = _agent(base, variant)
    run.env_steps = 200
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=20
    ) as env:
        m2 = run_dsrl(resumed, env, run, str(tmp_path), eval_fn=_eval_fn, resume=True)
    assert m2["updates"] > m["updates"] and m2["env_steps"] >= 200
    if variant == "na-bank":  # resumed from the checkpoint's bank: the first run's rows are still there
        assert len(resumed.bank) > n_first
        for key in ("features", "latent", "executed"):
            assert torch.equal(resumed.bank.data[key][:n_first], agent.bank.data[key][:n_first])
    assert m2["history"][: len(m["history"])] == m["history"]  # history carried over, not restarted
    assert state_dict_hash(base) == before


def test_steered_policy_with_zero_actor_acts_like_the_base_for_zero_noise():
    base = _base()
    agent = _agent(base)
    steered = SteeredPolicy(base, agent)
    obs = {"state": np.random.default_rng(0).normal(size=(3, 39)).astype(np.float32)}
    got = steered.act(obs)
    window = {"state": torch.as_tensor(obs["state"]).unsqueeze(1).repeat(1, TO, 1)}
    want = base.sample(window, noise=torch.zeros(3, *base.noise_shape))[:, TO - 1]
    np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("reward", ["sparse", "shaped"])
def test_loop_stores_the_configured_chunk_reward(tmp_path, reward):
    """sparse: −1 per chunk (0 only on success); shaped: the dense reward as a cost in [-1, 0] per chunk."""
    from robosteer.policies.checkpoint import load_checkpoint

    run = DSRLRunConfig(
        env_steps=64, warmup_chunks=100, eval_every=0, checkpoint_every=10**6, progress=False, reward=reward
    )
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=20
    ) as env:
        run_dsrl(_agent(_base()), env, run, str(tmp_path))
    r = load_checkpoint(tmp_path / "checkpoints" / "latest").modules["buffer"]["data/reward"]
    assert len(r) == 16
    if reward == "sparse":
        assert set(r.tolist()) <= {-1.0, 0.0}
    else:  # reach's dense reward is positive almost everywhere: a shaped chunk is strictly above -1
        assert bool(((r > -1.0) & (r <= 0.0)).all()) and len(set(r.tolist())) > 4
