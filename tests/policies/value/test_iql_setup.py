"""What IQL builds from its config (issue 59's mutation survivors): the bounds its config refuses, the value
net's widths, activation and LayerNorm, a frozen target copy, each optimiser's rate and the names its
checkpoints file optimisers and schedules under."""

from __future__ import annotations

import pytest
from test_value_targets import _PlantedCritic
from torch import nn

from robosteer.policies.value.iql import IQL, IQLConfig


@pytest.mark.parametrize("expectile", [0.0, 1.0, 1.5])
def test_expectiles_outside_the_open_unit_interval_are_refused(expectile: float) -> None:
    with pytest.raises(ValueError, match=rf"iql expectile={expectile} must lie in \(0, 1\)"):
        IQLConfig(expectile=expectile)


@pytest.mark.parametrize("discount", [1.0, 1.5])
def test_a_discount_of_one_or_more_is_refused(discount: float) -> None:
    with pytest.raises(ValueError, match=rf"iql discount={discount} must lie in \[0, 1\)"):
        IQLConfig(discount=discount)


def test_the_edges_that_are_valid() -> None:
    assert IQLConfig(discount=0.0, expectile=0.5).discount == 0.0  # γ = 0: one-step values
    assert IQLConfig(expectile=0.999).expectile == 0.999


def test_the_value_net_target_and_optimisers_follow_the_config() -> None:
    cfg = IQLConfig(hidden=[7, 5], activation="tanh", layer_norm=True, critic_lr=0.011, value_lr=0.022)
    learner = IQL(_PlantedCritic(obs_dim=3), cfg)  # type: ignore[arg-type]
    linears = [(m.in_features, m.out_features) for m in learner.value.modules() if isinstance(m, nn.Linear)]
    assert linears == [(3, 7), (7, 5), (5, 1)]
    assert any(isinstance(m, nn.Tanh) for m in learner.value.modules())
    assert sum(isinstance(m, nn.LayerNorm) for m in learner.value.modules()) == 2
    assert not any(p.requires_grad for p in learner.value_target.parameters())
    assert all(p.requires_grad for p in learner.value.parameters())
    rates = {name: opt.param_groups[0]["initial_lr"] for name, opt in learner.optimizers().items()}
    assert rates == {"critic": 0.011, "value": 0.022}
    assert set(learner.schedulers()) == {"critic", "value"}
    assert learner.schedulers()["value"].optimizer is learner.optimizers()["value"]
