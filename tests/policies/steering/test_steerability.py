"""The steerability check: its two spreads against a hand computation, and its verdict both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from robosteer.policies.steering.dsrl import DSRL
from robosteer.policies.steering.steerability import ADVICE, THRESHOLDS, measure, sample_states, verdict


class ScaledNoiseBase(nn.Module):
    """chunk row r = last state's first entry + c · noise row r: the noise moves it by exactly c."""

    noise_shape = (2, 1)

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = c

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor:
        assert noise is not None
        return obs["state"][:, -1, :1].unsqueeze(1) + self.c * noise  # (B, 2, 1)


def _agent(c: float) -> DSRL:
    return DSRL(ScaledNoiseBase(c), obs_dim=1, exec_slice=slice(0, 1))  # executes row 0 only


def test_spreads_match_a_hand_computation():
    states = torch.tensor([0.0, 1.0, 3.0]).view(3, 1, 1)  # (S, To, D)
    c, k = 0.5, 4
    got = measure(_agent(c), {"state": states}, latents=k, generator=torch.Generator().manual_seed(7))
    w = torch.randn(3 * k, 2, generator=torch.Generator().manual_seed(7))  # the same draws, by hand
    chunk = (
        states.view(3).repeat_interleave(k) + c * w[:, 0]
    ).double()  # row 0 in float32, as decoded: (S·K,)
    chunk = chunk.view(3, k)
    over_noise = chunk.std(dim=1).mean()
    over_states = chunk.mean(dim=1).std()
    assert got.over_noise == pytest.approx(float(over_noise), abs=1e-9)
    assert got.over_states == pytest.approx(float(over_states), abs=1e-9)
    assert got.ratio == pytest.approx(float(over_noise / over_states), abs=1e-9)
    assert (got.states, got.latents) == (3, k)


@pytest.mark.parametrize(("c", "expected"), [(0.01, "not steerable"), (1.0, "steerable")])
def test_verdict_both_ways(c: float, expected: str):
    """States spread with std ~1: a base the noise moves by 0.01 cannot be steered, one it moves by 1 can."""
    states = torch.linspace(-1.7, 1.7, 64).view(64, 1, 1)
    check = measure(_agent(c), {"state": states}, latents=16, generator=torch.Generator().manual_seed(0))
    assert check.verdict == expected
    assert (ADVICE in check.line()) == (expected != "steerable")  # the reason and what to do, when it cannot


def test_thresholds_order_the_verdicts():
    assert verdict(THRESHOLDS["weak"] - 1e-6) == "not steerable"
    assert verdict(THRESHOLDS["weak"]) == "weakly steerable"
    assert verdict(THRESHOLDS["steerable"]) == "steerable"


def test_states_come_from_offline_data_reproducibly_and_too_few_are_refused():
    offline = {"obs/state": torch.arange(10.0).view(10, 1, 1), "reward": torch.zeros(10)}
    a = sample_states(offline, None, ("state",), 4, seed=3)
    assert a["state"].shape == (4, 1, 1) and torch.equal(
        a["state"], sample_states(offline, None, ("state",), 4, 3)["state"]
    )
    assert len(set(a["state"].flatten().tolist())) == 4  # distinct transitions, no repeats
    with pytest.raises(ValueError, match="at least 2 states"):
        measure(_agent(1.0), {"state": torch.zeros(1, 1, 1)})


def test_fixed_latent_policies_hold_one_latent_at_every_state():
    """Each policy decodes its own N(0, I) latent (the generator's draws, in order) at whatever state it sees."""
    from robosteer.policies.steering.steerability import fixed_latent_policies

    class Cfg:
        n_obs_steps, n_action_steps, horizon = 1, 1, 2

    base = ScaledNoiseBase(1.0)
    base.config, base.device, base.shape_meta = (
        Cfg(),
        torch.device("cpu"),
        {"obs": {"state": {"shape": (1,)}}},
    )
    agent = DSRL(base, obs_dim=1, exec_slice=slice(0, 1))
    policies = fixed_latent_policies(agent, 3, torch.Generator().manual_seed(5))
    w = torch.randn(3, agent.latent_dim, generator=torch.Generator().manual_seed(5))  # (3, Tp·Da)
    states = torch.tensor([0.0, 2.0]).view(2, 1, 1)
    for policy, latent in zip(policies, w, strict=True):
        got = policy.sample({"state": states})  # (2, Tp, Da)
        assert torch.allclose(got, states[:, -1:, :1] + latent.view(1, 2, 1))
