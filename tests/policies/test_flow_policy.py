"""Flow policy: K-step Euler determinism, the time convention, and a learned bimodal velocity field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robosteer.policies import make_policy

torch.set_num_threads(1)

META = {"obs": {"state": {"shape": [1], "type": "low_dim"}}, "action": {"shape": [1]}}
STATS = {
    "state": {"min": np.array([-1.0]), "max": np.array([1.0])},
    "action": {"min": np.array([-1.0]), "max": np.array([1.0])},
}
TINY = {
    "n_obs_steps": 1,
    "horizon": 1,
    "n_action_steps": 1,
    "mlp_hidden_dim": 64,
    "mlp_n_blocks": 2,
    "time_embed_dim": 32,
}


def test_euler_deterministic_and_matches_manual_loop() -> None:
    policy = make_policy("flow", META, STATS, **TINY)
    obs = {"state": torch.randn(4, 1, 1)}
    noise = torch.randn(4, *policy.noise_shape)
    a = policy.sample(obs, noise)
    assert torch.equal(a, policy.sample(obs, noise.clone()))
    assert not torch.allclose(a, policy.sample(obs, torch.randn(4, 1, 1)))
    assert torch.equal(policy.sample(obs, torch.zeros(4, 1, 1)), policy.sample(obs, torch.zeros(4, 1, 1)))
    with torch.no_grad():  # x(0) = noise, K Euler steps of size 1/K at t = i/K, then clip
        cond, x = policy.encode_obs(obs), noise.clone()
        for i in range(10):
            x = x + 0.1 * policy.model(x, torch.full((4,), i / 10 * 100.0), cond)
    torch.testing.assert_close(a, policy.normalizer.unnormalize("action", x.clamp(-1, 1)))


def test_loss_target_is_data_minus_noise() -> None:
    """With a velocity net that outputs exactly x1 - x0 the loss is 0: checks x_t = (1-t) x0 + t x1, v = x1 - x0."""
    policy = make_policy("flow", META, STATS, **TINY)
    x1 = torch.full((8, 1, 1), 0.5)

    def oracle(xt, t_in, cond):
        tt = (t_in / 100.0)[:, None, None]
        return (x1 - xt) / (1 - tt)  # = x1 - x0 on the straight path

    policy.model.forward = oracle
    loss, _ = policy.loss({"obs": {"state": torch.zeros(8, 1, 1)}, "action": x1})
    assert float(loss) < 1e-6


@pytest.mark.parametrize("time_sampling", ["uniform", "beta"])
def test_bimodal_velocity_field_reproduces_both_modes(time_sampling: str) -> None:
    torch.manual_seed(0)
    policy = make_policy("flow", META, STATS, time_sampling=time_sampling, **TINY)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        a = (torch.randint(0, 2, (256, 1, 1), generator=g).float() * 2 - 1) * 0.7
        loss, _ = policy.loss({"obs": {"state": torch.zeros(256, 1, 1)}, "action": a})
        opt.zero_grad()
        loss.backward()
        opt.step()
    s = policy.sample({"state": torch.zeros(400, 1, 1)}).reshape(-1)
    hi, lo = float((s - 0.7).abs().lt(0.2).float().mean()), float((s + 0.7).abs().lt(0.2).float().mean())
    assert hi > 0.25 and lo > 0.25 and hi + lo > 0.8, (hi, lo)
