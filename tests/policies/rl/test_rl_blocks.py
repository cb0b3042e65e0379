"""RL building blocks: exact log-probabilities, bounds, ensemble independence, replay mixing and resume."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from robosteer.policies.rl import (
    CriticEnsemble,
    ReplayBuffer,
    TanhGaussianActor,
    Temperature,
    polyak_update,
    sample_mixed,
)

torch.set_num_threads(1)


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_actor_log_prob_matches_torch_reference(scale):
    torch.manual_seed(0)
    actor = TanhGaussianActor(5, 3, hidden=(32, 32), scale=scale, zero_init=False)
    obs = torch.randn(64, 5)
    g = torch.Generator().manual_seed(1)
    action, logp = actor(obs, generator=g)
    mu, std = actor.distribution(obs)
    ref = TransformedDistribution(Normal(mu, std), [TanhTransform(), AffineTransform(0.0, scale)])
    # Far from the tanh saturation the two agree to float precision.
    ok = action.abs().max(-1).values < 0.99 * scale
    assert ok.sum() > 30
    torch.testing.assert_close(logp[ok], ref.log_prob(action).sum(-1)[ok], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(actor.log_prob(obs, action)[ok], logp[ok], rtol=1e-3, atol=1e-3)


def test_zero_init_actor_is_exactly_zero_in_deterministic_mode():
    actor = TanhGaussianActor(7, 4, hidden=(32, 32), zero_init=True)
    action, _ = actor(torch.randn(10, 7), deterministic=True)
    assert torch.equal(action, torch.zeros(10, 4))


def test_critic_heads_are_independent_and_batched_correctly():
    torch.manual_seed(0)
    critic = CriticEnsemble(4, 2, hidden=(16, 16), num_critics=3)
    obs, act = torch.randn(8, 4), torch.randn(8, 2)
    q = critic(obs, act)
    assert q.shape == (3, 8)
    # Perturbing head 1's first layer changes only head 1.
    with torch.no_grad():
        critic.net[0].weight[1] += 1.0
    q2 = critic(obs, act)
    assert torch.equal(q[0], q2[0]) and torch.equal(q[2], q2[2]) and not torch.equal(q[1], q2[1])
    # Same result one sample at a time (no cross-sample leakage through the batched matmul / LayerNorm).
    single = torch.stack([critic(obs[i : i + 1], act[i : i + 1])[:, 0] for i in range(8)], dim=1)
    torch.testing.assert_close(single, q2)


def test_critic_reduce_and_subset():
    critic = CriticEnsemble(1, 1, num_critics=10)
    q = torch.arange(10.0).unsqueeze(1).repeat(1, 4)  # head i has value i
    assert torch.equal(critic.reduce(q, "min"), torch.zeros(4))
    assert torch.equal(critic.reduce(q, "mean"), torch.full((4,), 4.5))
    g = torch.Generator().manual_seed(0)
    sub = {float(critic.reduce(q, "min", subset=2, generator=g)[0]) for _ in range(50)}
    assert len(sub) > 3 and min(sub) >= 0 and max(sub) <= 8  # the min of 2 of 10 heads is never head 9
    with pytest.raises(ValueError, match="min"):
        critic.reduce(q, "max")


def test_subset_min_computes_only_the_drawn_heads_and_equals_reduce():
    torch.manual_seed(0)
    critic = CriticEnsemble(3, 2, hidden=[16, 16], num_critics=10)
    obs, act = torch.randn(6, 3), torch.randn(6, 2)
    full = critic(obs, act)  # (10, 6)
    heads = torch.tensor([7, 2])
    torch.testing.assert_close(critic(obs, act, heads), full[heads])  # head j's own weights, LayerNorm too
    for subset in (2, 10):
        for seed in range(5):
            want = critic.reduce(full, "min", subset=subset, generator=torch.Generator().manual_seed(seed))
            got = critic.subset_min(obs, act, subset, torch.Generator().manual_seed(seed))
            torch.testing.assert_close(got, want)
    draws = {
        tuple(critic.subset_min(obs, act, 2, torch.Generator().manual_seed(s)).tolist()) for s in range(20)
    }
    assert len(draws) > 3  # the heads really are drawn at random


def test_polyak_update():
    a, b = CriticEnsemble(2, 1, num_critics=2), CriticEnsemble(2, 1, num_critics=2)
    target = a.make_target()
    before = [p.clone() for p in target.parameters()]
    polyak_update(target, b, 0.25)
    for t, t0, o in zip(target.parameters(), before, b.parameters()):
        torch.testing.assert_close(t, 0.75 * t0 + 0.25 * o)
    assert not any(p.requires_grad for p in target.parameters())


def _buffer(cap=5):
    return ReplayBuffer(
        cap,
        {"obs/state": ((3,), torch.float32), "action": ((2, 4), torch.float32), "done": ((), torch.float32)},
    )


def test_replay_ring_wraps_and_validates():
    buf = _buffer(5)
    for i in range(7):
        buf.add(
            **{
                "obs/state": torch.full((1, 3), float(i)),
                "action": torch.zeros(1, 2, 4),
                "done": torch.zeros(1),
            }
        )
    assert len(buf) == 5
    assert sorted(buf.data["obs/state"][:, 0].tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    with pytest.raises(KeyError, match="missing fields"):
        buf.add(**{"obs/state": torch.zeros(1, 3)})
    with pytest.raises(ValueError, match="expected"):
        buf.add(**{"obs/state": torch.zeros(1, 4), "action": torch.zeros(1, 2, 4), "done": torch.zeros(1)})


def test_mixed_sampling_takes_exactly_the_offline_share():
    off, on = _buffer(100), _buffer(100)
    off.add(**{"obs/state": torch.ones(50, 3), "action": torch.zeros(50, 2, 4), "done": torch.zeros(50)})
    on.add(**{"obs/state": torch.zeros(50, 3), "action": torch.zeros(50, 2, 4), "done": torch.zeros(50)})
    batch = sample_mixed(off, on, 256, 0.5, torch.Generator().manual_seed(0))
    assert batch["obs/state"][:, 0].sum() == 128


def test_replay_state_dict_round_trip_is_exact():
    buf = _buffer(10)
    buf.add(**{"obs/state": torch.randn(4, 3), "action": torch.randn(4, 2, 4), "done": torch.ones(4)})
    other = _buffer(10)
    other.load_state_dict(buf.state_dict())
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    s1, s2 = buf.sample(16, g1), other.sample(16, g2)
    assert all(torch.equal(s1[k], s2[k]) for k in s1) and other.ptr == buf.ptr


def test_temperature_moves_entropy_towards_target():
    temp = Temperature(init=1.0, target_entropy=0.0)
    opt = torch.optim.SGD(temp.parameters(), lr=0.1)
    for _ in range(10):  # log π = +1 > −H̄: entropy too low ⇒ α must grow
        opt.zero_grad()
        temp.loss(torch.ones(8)).backward()
        opt.step()
    assert temp.alpha > 1.0
