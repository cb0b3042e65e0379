"""RL building blocks pinned against hand-computed values: log π of the tanh-Gaussian (with and without the
scale term), the temperature loss and its gradient with a non-zero target entropy, replay sampling and the
ring buffer's slots."""

from __future__ import annotations

import math

import pytest
import torch

from robosteer.policies.rl import ReplayBuffer, TanhGaussianActor, Temperature

torch.set_num_threads(1)


@pytest.mark.parametrize("scale_in_log_prob", [True, False])
def test_actor_sample_and_log_prob_by_hand(scale_in_log_prob: bool) -> None:
    """a = M·tanh(μ + σ ε); log π = Σ_d [log N(u; μ, σ) − log(1 − tanh²u)] − d·log M (only with the flag)."""
    m, d = 2.0, 3
    actor = TanhGaussianActor(4, d, hidden=(8,), scale=m, scale_in_log_prob=scale_in_log_prob)
    mu, log_std = torch.tensor([0.4, -0.3, 0.1]), torch.tensor([-0.2, 0.1, -0.7])
    with torch.no_grad():
        actor.mean.weight.zero_()
        actor.mean.bias.copy_(mu)
        actor.log_std.weight.zero_()
        actor.log_std.bias.copy_(log_std)
    a, logp = actor(torch.randn(5, 4), generator=torch.Generator().manual_seed(0))
    eps = torch.randn(5, d, generator=torch.Generator().manual_seed(0))
    u = mu + log_std.exp() * eps
    gauss = -0.5 * eps**2 - log_std - 0.5 * math.log(2 * math.pi)
    want = (gauss - torch.log(1 - torch.tanh(u) ** 2)).sum(-1) - (
        d * math.log(m) if scale_in_log_prob else 0.0
    )
    torch.testing.assert_close(a, m * torch.tanh(u), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logp, want, rtol=1e-5, atol=1e-5)
    mode, _ = actor(torch.randn(5, 4), deterministic=True)
    torch.testing.assert_close(mode, (m * torch.tanh(mu)).expand(5, d))


def test_temperature_loss_and_gradient_by_hand() -> None:
    """L = −mean(log α·(log π + H̄)) with H̄ = −2; ∂L/∂log α = −mean(log π + H̄); no gradient reaches log π."""
    temp = Temperature(init=0.3, target_entropy=-2.0)
    logp = torch.tensor([0.5, 3.0, 1.5, -1.0], requires_grad=True)
    loss = temp.loss(logp)
    assert loss.item() == pytest.approx(-(math.log(0.3) * (logp.detach() - 2.0)).mean().item(), rel=1e-6)
    g_alpha, g_logp = torch.autograd.grad(loss, [temp.log_alpha, logp], allow_unused=True)
    assert g_alpha.item() == pytest.approx(-(logp.detach() - 2.0).mean().item(), rel=1e-6)
    assert g_logp is None
    assert temp.alpha.item() == pytest.approx(0.3) and not temp.alpha.requires_grad


def test_replay_samples_only_filled_rows_and_the_ring_overwrites_the_oldest() -> None:
    """A partly filled buffer draws only its filled rows; adding past capacity overwrites the oldest slots."""
    buf = ReplayBuffer(10, {"x": ((), torch.float32)})
    buf.add(x=torch.tensor([1.0, 2.0, 3.0]))
    drawn = buf.sample(300, torch.Generator().manual_seed(0))["x"]
    assert set(drawn.tolist()) == {1.0, 2.0, 3.0}
    buf.add(x=torch.arange(4.0, 13.0))  # 9 more rows: 12 in all into 10 slots
    assert len(buf) == 10 and buf.ptr == 2
    assert buf.data["x"].tolist() == [11.0, 12.0, *range(3, 11)]
    assert set(buf.sample(500, torch.Generator().manual_seed(1))["x"].tolist()) == set(range(3, 13))
