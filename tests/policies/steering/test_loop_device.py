"""With a tensor env (MuJoCo Warp, Isaac), the steering loop keeps what the env returns on the env's device: from
``env.step`` through the replay, the base's ``sample(obs, noise)``, the actor and the critics, at most one host
sync per vector step, the same at 4 and at 256 envs (none per env). The env's outputs are a tensor subclass that
counts every way a tensor reaches the host; what a tensor derived from them does is counted too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from policy_testkit import tiny_steering_base

from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, run_dsrl
from robosteer.policies.steering.loop import OnlineRunConfig
from robosteer.sim.lockstep import SimStep, TorchBatchedEnv

torch.set_num_threads(1)
TO, TA, D = 2, 4, 39
VECTOR_STEPS = 12  # 12-step episodes in 4-step chunks: every env ends one about every third vector step
HOST = {"cpu", "numpy", "item", "tolist", "__array__", "__bool__", "__int__", "__float__", "__index__"}


class Counted(torch.Tensor):
    """A tensor whose every trip to the host is counted (and whose results are Counted too)."""

    syncs = 0

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") in HOST:
            Counted.syncs += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def _counted(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.as_subclass(Counted)
    if isinstance(value, dict):
        return {k: _counted(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_counted(v) for v in value)
    return value


class DriftEnv(TorchBatchedEnv):
    """A tensor env: 39-d states drift with the action's first three entries; success near the origin;
    12-step episodes (a few end in every chunk of a long run)."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(
            "drift", num_envs, D, 4, "cpu", action_chunk=TA, obs_history=TO, max_episode_steps=12
        )
        self.gen = torch.Generator().manual_seed(0)
        self.x = torch.zeros(num_envs, D)
        self.t = torch.zeros(num_envs, dtype=torch.long)
        self.vector_steps = 0

    def _draw(self, n: int) -> torch.Tensor:
        return torch.rand(n, D, generator=self.gen) - 0.5

    def _sim_reset(self, seed: int | None) -> torch.Tensor:
        self.x, self.t = self._draw(self.num_envs), torch.zeros(self.num_envs, dtype=torch.long)
        return self.x.clone()

    def _sim_step(self, action: torch.Tensor) -> SimStep:
        self.x = self.x.clone()
        self.x[:, :3] += 0.05 * action[:, :3]
        self.t += 1
        dist = self.x[:, :3].norm(dim=1)
        success, truncated = dist < 0.1, self.t >= 12
        done = success | truncated
        final = self.x.clone()
        self.x = torch.where(done[:, None], self._draw(self.num_envs), self.x)
        self.t = torch.where(done, 0, self.t)
        return SimStep(self.x.clone(), -dist, success, truncated & ~success, final, success)

    def step(self, action: Any) -> Any:
        # the env's own checks are its business: only what it hands the loop is counted
        plain = action.as_subclass(torch.Tensor) if isinstance(action, torch.Tensor) else action
        self.vector_steps += 1
        return _counted(super().step(plain))

    def reset(self, seed: Any = None) -> Any:
        return _counted(super().reset(seed))


def _syncs_per_vector_step(num_envs: int, tmp_path: Any) -> float:
    base = tiny_steering_base(to=TO, tp=8, ta=TA)
    torch.manual_seed(0)
    cfg = DSRLConfig(
        hidden=[32, 32], batch_size=16, noise_critic_steps=1, noise_critic_samples=4, noise_bank=64
    )
    learner = DSRL(base, obs_dim=TO * D, exec_slice=slice(TO - 1, TO - 1 + TA), config=cfg)
    run = OnlineRunConfig(
        env_steps=VECTOR_STEPS * num_envs * TA, warmup_chunks=2 * num_envs, eval_every=0, eval_episodes=1,
        checkpoint_every=10**9, log_every=10**9, progress=False, reward="shaped", utd=8 / num_envs,
    )  # fmt: skip  # 8 updates a vector step at any batch: the updates read the replay, not the env
    env = DriftEnv(num_envs)
    Counted.syncs = 0
    metrics = run_dsrl(learner, env, run, str(tmp_path / f"b{num_envs}"))
    assert metrics["train_episodes"] > 0 and metrics["updates"] > 0  # episodes ended and were counted
    assert env.vector_steps >= VECTOR_STEPS
    return Counted.syncs / env.vector_steps


@pytest.mark.parametrize("num_envs", [4, 256])
def test_at_most_one_host_sync_per_vector_step_at_any_batch(num_envs: int, tmp_path: Any) -> None:
    per_step = _syncs_per_vector_step(num_envs, tmp_path)
    # the env steps counted once a vector step; the finished episodes settled once or twice in the run
    assert per_step <= 1.0 + 2 / VECTOR_STEPS, per_step


def test_the_counter_sees_a_host_round_trip() -> None:
    """The subclass counts what the loop must not do per env (so the bound above can fail)."""
    Counted.syncs = 0
    t = _counted(torch.ones(4))
    float(t.sum())
    t.cpu()
    np.asarray(t * 2)
    [bool(x) for x in t > 0]
    assert Counted.syncs >= 3 + 4
