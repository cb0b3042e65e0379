"""What Cal-QL builds from its config (issue 59's mutation survivors): the actor's widths, activation and
non-zero start, the entropy target −|A|, each optimiser's rate, the names its checkpoints file them under,
and the single next-state sample when the max target backup is off."""

from __future__ import annotations

import pytest
import torch
from test_value_targets import DA, _PlantedCritic
from torch import nn

from robosteer.policies.value.calql import CalQL, CalQLConfig


def _linears(module: nn.Module) -> list[tuple[int, int]]:
    return [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, nn.Linear)]


def test_the_actor_optimisers_and_temperature_follow_the_config() -> None:
    cfg = CalQLConfig(hidden=[7, 5], activation="tanh", critic_lr=0.011, actor_lr=0.022, temperature_lr=0.033)
    learner = CalQL(_PlantedCritic(obs_dim=3), cfg)  # type: ignore[arg-type]
    assert _linears(learner.actor) == [(3, 7), (7, 5), (5, DA), (5, DA)]  # trunk, mean head, log-std head
    assert any(isinstance(m, nn.Tanh) for m in learner.actor.modules())
    assert learner.temperature.target_entropy == -float(DA)  # −|A| of the scored span
    rates = {name: opt.param_groups[0]["initial_lr"] if name != "temperature" else opt.param_groups[0]["lr"]
             for name, opt in learner.optimizers().items()}  # fmt: skip
    assert rates == {"critic": 0.011, "actor": 0.022, "temperature": 0.033}
    assert set(learner.schedulers()) == {"actor", "critic"}
    # not DSRL's zero-initialised mean head: the actor's mean already depends on the state
    mean, _ = learner.actor(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), deterministic=True)
    assert mean.abs().min() > 0 and (mean[0] != mean[1]).any()


def test_without_the_max_backup_one_next_action_is_drawn_per_row() -> None:
    drawn = []
    for max_backup in (True, False):
        cfg = CalQLConfig(cql_n_actions=3, cql_max_target_backup=max_backup)
        learner = CalQL(_PlantedCritic(obs_dim=2), cfg)  # type: ignore[arg-type]
        sample = learner._policy_samples
        learner._policy_samples = lambda s, n, g, sample=sample: (drawn.append(n), sample(s, n, g))[1]  # type: ignore[method-assign]
        b = 2
        batch = {"obs": torch.zeros(b, 2), "next_obs": torch.ones(b, 2), "action": torch.zeros(b, DA)}
        batch |= {"reward": torch.zeros(b), "done": torch.zeros(b), "mc_return": torch.zeros(b)}
        learner.update(batch, torch.Generator().manual_seed(0))
        drawn.append("|")
    # the backup's draw comes first; then the CQL term's n samples at s and s' and the actor's
    assert drawn[0] == 3 and drawn[drawn.index("|") + 1] == 1


def test_the_config_bounds_and_their_valid_edges() -> None:
    assert (
        CalQLConfig(cql_n_actions=1, discount=0.0).cql_n_actions == 1
    )  # one sample each; γ = 0: one-step values
    with pytest.raises(ValueError, match=r"calql cql_n_actions=0 must be >= 1"):
        CalQLConfig(cql_n_actions=0)
    for discount in (1.0, 1.5):
        with pytest.raises(ValueError, match=rf"calql discount={discount} must lie in \[0, 1\)"):
            CalQLConfig(discount=discount)
