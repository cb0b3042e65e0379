"""The steering loop (DSRL, EXPO: ``run_online``) stops at the first NaN/inf learner loss and never saves NaN
weights: NonFiniteError naming the loss and the env step, checkpoints/latest left as the last good one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from policy_testkit import tiny_steering_base
from torch import nn

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.engine import NonFiniteError
from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, run_dsrl
from robosteer.policies.steering.loop import OnlineLearner, OnlineRunConfig, run_online

torch.set_num_threads(1)
TO, TA, D = 2, 4, 39


class StateEnv:
    """Two envs of (To, 39) random states, Ta executed steps per chunk, 5-chunk time-outs; the dense reward is
    NaN from chunk ``nan_from`` on (a broken sensor), else 0."""

    def __init__(self, nan_from: int = 10**9) -> None:
        self.num_envs = 2
        self.single_observation_space = {"state": SimpleNamespace(shape=(TO, D))}
        self.nan_from, self.t, self.rng = nan_from, 0, np.random.default_rng(0)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"state": self.rng.standard_normal((2, TO, D)).astype(np.float32)}

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        return self._obs()

    def step(self, chunk: np.ndarray) -> tuple:
        self.t += 1
        obs = self._obs()
        reward = np.full(2, np.nan if self.t >= self.nan_from else 0.0)
        trunc = np.full(2, self.t % 5 == 0)
        info = {"steps_executed": np.full(2, chunk.shape[1]), "success": np.zeros(2, bool), "final_obs": obs}
        return obs, reward, np.zeros(2, bool), trunc, info


class FaultyLearner(OnlineLearner):
    """A learner whose ``learn`` reports ``loss_name`` = NaN on its ``fault_at``-th call, finite before."""

    kind, label, obs_keys, taken_dim = "fake", "fake", ("state",), 2

    def __init__(self, loss_name: str, fault_at: int) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.ones(3))
        self.loss_name, self.fault_at, self.calls = loss_name, fault_at, 0

    def warmup_action(self, obs, generator):
        return torch.zeros(2, 2), torch.zeros(2, TA, 4)

    explore = warmup_action

    def learn(self, n_updates, n_transitions, sample, generator):
        self.calls += 1
        return {self.loss_name: float("nan") if self.calls == self.fault_at else 0.5, "q": 1.0}

    def eval_policy(self):
        raise AssertionError("no evaluation in these tests")

    def optimizers(self):
        return {}

    def get_config(self):
        return {}


def _cfg(**over) -> OnlineRunConfig:
    base = dict(
        env_steps=400, warmup_chunks=4, eval_every=0, checkpoint_every=16, log_every=8, progress=False
    )
    return OnlineRunConfig(**{**base, **over})


@pytest.mark.parametrize("loss_name", ["critic_loss", "actor_loss", "base_loss", "noise_critic_loss"])
def test_a_nan_learner_loss_stops_the_run_without_saving(tmp_path, loss_name):
    """Each iteration is 2 envs × Ta = 8 env steps; learning starts at env step 16, learn call 4 is at 40."""
    learner = FaultyLearner(loss_name, fault_at=4)
    with pytest.raises(NonFiniteError) as info:
        run_online(learner, StateEnv(), _cfg(), str(tmp_path))
    latest = tmp_path / "checkpoints" / "latest"
    msg = str(info.value)
    assert f"steering (fake): non-finite {loss_name} = nan at env step 40;" in msg, msg
    assert f"{latest} holds the last good state (env step 32)" in msg, msg
    assert load_checkpoint(latest).extra["counters"]["env_steps"] == 32  # nothing saved after the fault


def test_nan_weights_with_finite_losses_are_never_saved(tmp_path):
    class Breaks(FaultyLearner):
        def learn(self, n_updates, n_transitions, sample, generator):
            info = super().learn(n_updates, n_transitions, sample, generator)
            if self.calls == 3:  # at env step 32, a save step; the reported loss stays finite
                with torch.no_grad():
                    self.p[1] = float("inf")
            return info

    with pytest.raises(NonFiniteError, match=r"weights 'p' hold NaN/inf at env step 32; .*\(env step 16\)"):
        run_online(Breaks("critic_loss", fault_at=-1), StateEnv(), _cfg(), str(tmp_path))
    assert load_checkpoint(tmp_path / "checkpoints" / "latest").extra["counters"]["env_steps"] == 16


def test_dsrl_on_nan_rewards_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    """The real DSRL-NA learner: NaN rewards reach the replay from chunk 5 on; its critic loss turns NaN."""
    cfg = DSRLConfig(variant="na", hidden=[32, 32], batch_size=16, noise_critic_steps=1)
    agent = DSRL(
        tiny_steering_base(to=TO, tp=8, ta=TA),
        obs_dim=TO * D,
        exec_slice=slice(TO - 1, TO - 1 + TA),
        config=cfg,
    )
    with pytest.raises(
        NonFiniteError, match=r"steering \(dsrl\): non-finite .*critic_loss = nan at env step"
    ):
        run_dsrl(agent, StateEnv(nan_from=5), _cfg(reward="dense", checkpoint_every=8), str(tmp_path))
    ck = load_checkpoint(tmp_path / "checkpoints" / "latest")
    assert 32 <= ck.extra["counters"]["env_steps"] < 400
    agent_state = ck.modules["agent"]
    assert all(torch.isfinite(t).all() for t in agent_state.values() if t.is_floating_point())
