"""An exact resume: a steering run stopped and resumed ends where the uninterrupted run ends, bit for bit
(learner, optimizers, replay, noise bank / BC replay, evaluation history), because the episodes in flight are
replayed from the checkpoint instead of restarted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from policy_testkit import tiny_steering_base

from robosteer import sim
from robosteer.policies.checkpoint import load_checkpoint, state_dict_hash
from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, run_dsrl
from robosteer.policies.steering.expo import EXPO, EXPOConfig, run_expo
from robosteer.policies.steering.loop import OnlineRunConfig

torch.set_num_threads(1)
TO, TA = 2, 4
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def _same(a: Any, b: Any, where: str = "") -> None:
    """Every tensor, array and value of two nested checkpoint states is equal (bit for bit)."""
    if isinstance(a, torch.Tensor | np.ndarray):
        assert type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype, where
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else np.array_equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}.{i}")
    else:
        assert a == b, where


def _learner(kind: str):
    base = tiny_steering_base(to=TO, tp=8, ta=TA)
    torch.manual_seed(1)
    if kind == "dsrl":
        cfg = DSRLConfig(
            hidden=[32, 32], batch_size=16, noise_critic_steps=1, noise_critic_samples=4, noise_bank=64
        )
        return DSRL(base, obs_dim=TO * 39, exec_slice=slice(TO - 1, TO - 1 + TA), config=cfg)
    return EXPO(base, TO * 39, EXPOConfig(hidden=[32, 32], batch_size=16, num_samples=4, num_edits=3))


def _eval_fn(policy):
    with sim.make_env("reach-v3", num_envs=2, seed=5, max_episode_steps=20) as env:
        return sim.evaluate(env, policy, episodes=2, seed=5, progress=False)


def _run(kind: str, out, env_steps: int, resume: bool = False):
    learner = _learner(kind)
    cfg = OnlineRunConfig(
        env_steps=env_steps, warmup_chunks=6, eval_every=48, eval_episodes=2, checkpoint_every=48, log_every=40,
        progress=False,
    )  # fmt: skip
    steer = run_dsrl if kind == "dsrl" else run_expo
    # 30-step episodes and 4-step chunks: a stop at 96 env steps (12 chunks of 2 envs) is mid-episode
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=30
    ) as env:
        metrics = steer(learner, env, cfg, str(out), eval_fn=_eval_fn, resume=resume)
    return learner, metrics


@pytest.mark.parametrize("kind", ["dsrl", "expo"])
def test_a_stopped_and_resumed_run_ends_bit_identical_to_the_uninterrupted_one(tmp_path, kind):
    whole, m_whole = _run(kind, tmp_path / "whole", 192)
    _run(kind, tmp_path / "split", 96)
    stopped = load_checkpoint(tmp_path / "split" / "checkpoints" / "latest")
    lengths = [len(e["actions"]) for e in stopped.extra["in_flight"]["envs"]]
    assert all(0 < n < 30 // TA for n in lengths), lengths  # stopped mid-episode in every env
    resumed, m_resumed = _run(kind, tmp_path / "split", 192, resume=True)

    assert m_resumed["env_steps"] == m_whole["env_steps"] and m_resumed["updates"] == m_whole["updates"]
    assert (
        m_resumed["history"] == m_whole["history"]
        and m_resumed["train_episodes"] == m_whole["train_episodes"]
    )
    # the training episodes' figures too: the returns of the episodes in flight carried over, not restarted
    assert m_resumed["train_return"] == m_whole["train_return"] is not None
    assert m_resumed["train_success_rate"] == m_whole["train_success_rate"]
    assert state_dict_hash(resumed) == state_dict_hash(whole)
    a = load_checkpoint(tmp_path / "whole" / "checkpoints" / "latest")
    b = load_checkpoint(tmp_path / "split" / "checkpoints" / "latest")
    _same(a.modules, b.modules, "modules")  # learner, optimizers, replay, bank / BC replay
    _same(a.extra["in_flight"], b.extra["in_flight"], "in_flight")
    _same(a.extra["rng"], b.extra["rng"], "rng")


class _NoReplayEnv:
    """A batched env that cannot replay episodes in flight (a GPU sim's): only ``reset``."""

    num_envs = 2

    def reset(self, seed: int) -> dict[str, np.ndarray]:
        return {"state": np.full((2, 3), float(seed))}


class _ReplayEnv(_NoReplayEnv):
    def restore_episodes(self, states: list) -> dict[str, np.ndarray] | None:
        return {"state": np.asarray(states, dtype=float)} if states else None


def test_episodes_in_flight_are_replayed_or_the_resume_says_they_start_afresh(caplog) -> None:
    from robosteer.policies.steering.loop import resume_episodes

    flight = {"envs": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "ep_return": [0.5, 1.5]}
    obs, ret = resume_episodes(_ReplayEnv(), flight, seed=7)
    assert obs["state"][1, 2] == 6.0 and ret.tolist() == [0.5, 1.5] and not caplog.records
    for env, saved in ((_NoReplayEnv(), flight), (_ReplayEnv(), {"envs": [], "ep_return": [0.0, 0.0]})):
        caplog.clear()
        obs, ret = resume_episodes(env, saved, seed=7)
        assert (obs["state"] == 7.0).all() and ret.tolist() == [0.0, 0.0]
        assert "they start afresh" in caplog.text  # said, whichever env cannot replay them
    caplog.clear()
    obs, _ = resume_episodes(_NoReplayEnv(), None, seed=3)  # a fresh run: nothing to say
    assert (obs["state"] == 3.0).all() and not caplog.records
