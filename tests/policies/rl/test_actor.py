"""The tanh-Gaussian actor pinned where mutation testing found it unpinned: the trunk computed by hand (layers,
LayerNorm, activation), the documented defaults, the log-std clamp, the sample drawn by hand in float64, the
squash's clamp strictly inside ±scale on both sides, log π of actions on the boundary, and EncodedActor's
wiring (a recording encoder)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from robosteer.policies.rl import TanhGaussianActor
from robosteer.policies.rl.actor import EncodedActor

torch.set_num_threads(1)


@pytest.mark.parametrize("layer_norm", [True, False])
def test_trunk_by_hand(layer_norm: bool) -> None:
    """hidden (8, 6, 4): Linear → [LayerNorm] → tanh three times, then the mean head; std = exp(bias)."""
    torch.manual_seed(0)
    actor = TanhGaussianActor(
        5, 3, hidden=(8, 6, 4), act="tanh", layer_norm=layer_norm, zero_init=False, log_std_init=-0.5
    )
    linears = [m for m in actor.trunk if isinstance(m, nn.Linear)]
    assert [m.out_features for m in linears] == [8, 6, 4]
    x = torch.randn(7, 5)
    h = x
    for lin in linears:
        h = lin(h)
        h = torch.tanh(F.layer_norm(h, h.shape[-1:]) if layer_norm else h)
    mu, std = actor.distribution(x)
    torch.testing.assert_close(mu, actor.mean(h))
    torch.testing.assert_close(std, torch.full((7, 3), math.exp(-0.5)))


def test_defaults_are_the_documented_ones() -> None:
    """scale 1, ReLU (256, 256) without LayerNorm, zero-initialised mean, log σ 0, −log scale in log π."""
    torch.manual_seed(0)
    default = TanhGaussianActor(3, 2)
    torch.manual_seed(0)
    spelled = TanhGaussianActor(
        3,
        2,
        hidden=(256, 256),
        scale=1.0,
        act="relu",
        layer_norm=False,
        zero_init=True,
        log_std_init=0.0,
        scale_in_log_prob=True,
    )
    assert default.action_dim == 2 and default.scale == 1.0
    a, b = default.state_dict(), spelled.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not any(isinstance(m, nn.LayerNorm) for m in default.modules())
    assert torch.equal(default.mean.weight, torch.zeros(2, 256))
    obs = torch.randn(4, 3)
    (act_a, logp_a), (act_b, logp_b) = default(obs, deterministic=True), spelled(obs, deterministic=True)
    assert torch.equal(act_a, act_b) and torch.equal(logp_a, logp_b)


def test_log_std_is_clamped_to_sb3_range() -> None:
    actor = TanhGaussianActor(2, 3, hidden=(4,))
    with torch.no_grad():
        actor.log_std.bias.copy_(torch.tensor([10.0, -30.0, 0.5]))
    _, std = actor.distribution(torch.randn(2, 2))
    torch.testing.assert_close(std, torch.tensor([[math.exp(2.0), math.exp(-20.0), math.exp(0.5)]] * 2))


def test_sample_by_hand_in_float64() -> None:
    """a = scale·tanh(μ + σ·ε) with ε drawn from the caller's generator in the actor's dtype (float64 here)."""
    torch.manual_seed(1)
    actor = TanhGaussianActor(4, 3, hidden=(8,), scale=2.0, zero_init=False, log_std_init=-1.0).double()
    obs = torch.randn(5, 4, dtype=torch.float64)
    action, _ = actor(obs, generator=torch.Generator().manual_seed(3))
    mu, std = actor.distribution(obs)
    eps = torch.randn(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert action.dtype == torch.float64
    torch.testing.assert_close(action, 2.0 * torch.tanh(mu + std * eps), rtol=0, atol=1e-12)


def test_sampling_happens_on_the_actors_device() -> None:
    """The noise is drawn on the actor's device ("meta": any device that is not the CPU)."""
    actor = TanhGaussianActor(3, 2, hidden=(8,)).to("meta")
    action, logp = actor(torch.zeros(4, 3, device="meta"))
    assert action.device.type == "meta" and logp.shape == (4,)


def test_saturated_outputs_stay_strictly_inside_scale_on_both_sides() -> None:
    """Means of ±30 saturate tanh to ±1.0 in float32; the clamp keeps every output strictly inside ±1.5. Unit σ
    (sampled: pre-tanh values tens of σ past the 1.49 mark) and a fixed seed: the outcome never rests on a draw."""
    torch.manual_seed(0)
    actor = TanhGaussianActor(4, 6, hidden=(16,), scale=1.5, zero_init=False, log_std_init=0.0)
    with torch.no_grad():
        actor.mean.bias.copy_(torch.tensor([30.0, -30.0, 30.0, -30.0, 30.0, -30.0]))
    for deterministic in (True, False):
        action, logp = actor(torch.randn(256, 4), deterministic=deterministic)
        assert (action.abs() < 1.5).all() and torch.isfinite(logp).all()
        assert (action[:, 0::2] > 1.49).all() and (action[:, 1::2] < -1.49).all()


def test_log_prob_of_actions_on_the_boundary_is_finite_and_by_hand() -> None:
    """Actions at exactly ±scale are scored as ±scale·(1 − 1e-6): u = atanh(±(1 − 1e-6)), row by row."""
    actor = TanhGaussianActor(2, 2, hidden=(4,), scale=2.0, zero_init=False)
    obs = torch.randn(2, 2)
    action = torch.tensor([[2.0, -2.0], [-2.0, 2.0]])
    mu, std = actor.distribution(obs)
    edge = torch.tensor(1 - 1e-6)
    u = torch.atanh(torch.stack([torch.stack([edge, -edge]), torch.stack([-edge, edge])]))
    want = (
        -0.5 * ((u - mu) / std) ** 2
        - std.log()
        - 0.5 * math.log(2 * math.pi)
        - torch.log1p(-(torch.tanh(u.double()) ** 2)).float()
        - math.log(2.0)
    ).sum(-1)
    got = actor.log_prob(obs, action)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


class _Encoder(nn.Module):
    """Sums a window's features; records every observation dict it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, torch.Tensor]] = []

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        self.seen.append(obs)
        return obs["state"].sum(1)


def test_encoded_actor_feeds_the_encoders_features_to_its_head() -> None:
    torch.manual_seed(2)
    head = TanhGaussianActor(3, 2, hidden=(8,), zero_init=False)
    encoder = _Encoder()
    actor = EncodedActor(encoder, head)
    assert actor.action_dim == 2 and actor.head is head and actor.encoder is encoder
    obs = {"state": torch.randn(4, 2, 3)}
    feats = obs["state"].sum(1)
    action, logp = actor(obs, generator=torch.Generator().manual_seed(5))
    want_a, want_logp = head(feats, generator=torch.Generator().manual_seed(5))
    assert torch.equal(action, want_a) and torch.equal(logp, want_logp)
    det, _ = actor(obs, deterministic=True)
    assert torch.equal(det, head(feats, deterministic=True)[0])
    assert not torch.equal(action, det)  # the default samples
    torch.testing.assert_close(actor.log_prob(obs, action), head.log_prob(feats, action))
    assert len(encoder.seen) == 3 and all(seen is obs for seen in encoder.seen)
