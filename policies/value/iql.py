"""IQL critic (Kostrikov et al.): expectile regression of V onto Q, Q regressed onto r + γ·V(s').

Only the critic is learned: V-GPS needs Q(s, a), not IQL's advantage-weighted actor. Never queries Q on
actions outside the data, so it needs no conservatism term. Reference values: the V-GPS repo's ``lc_iql``
(expectile 0.7, discount 0.98, LayerNorm critics of (256, 256), target rate 5e-3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from policies.rl import NormalizedCritic, mlp, polyak_update


@dataclass
class IQLConfig:
    """Every IQL hyper-parameter (configs/algo/iql.yaml mirrors these)."""

    discount: float = 0.98  # γ per transition (V-GPS: 0.98)
    expectile: float = 0.7  # τ of the expectile loss (0.5 = mean regression; → 1 = max over the data)
    tau: float = 0.005  # Polyak rate of the target Q
    critic_lr: float = 3e-4
    value_lr: float = 3e-4
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    num_critics: int = 2
    activation: str = "relu"
    layer_norm: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.expectile < 1.0:
            raise ValueError(f"iql expectile={self.expectile} must lie in (0, 1); the reference uses 0.7")
        if not 0.0 <= self.discount < 1.0:
            raise ValueError(f"iql discount={self.discount} must lie in [0, 1); the reference uses 0.98")


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """|τ − 1(diff < 0)|·diff², averaged: the asymmetric L2 of IQL's value step."""
    weight = torch.where(diff > 0, expectile, 1.0 - expectile)
    return (weight * diff**2).mean()


class IQL(nn.Module):
    """Q ensemble (in ``critic``, with its own normaliser) + state value V, trained from normalised batches.

    ``update(batch)``: ``obs``/``next_obs`` (B, F) critic features, ``action`` (B, Da_c) in the critic's
    [-1, 1] units, ``reward`` (B,), ``done`` (B,).
    """

    def __init__(self, critic: NormalizedCritic, config: IQLConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or IQLConfig()
        self.critic = critic
        self.value = mlp(critic.obs_dim, cfg.hidden, 1, act=cfg.activation, layer_norm=cfg.layer_norm)
        self.critic_opt = torch.optim.Adam(critic.q.parameters(), lr=cfg.critic_lr)
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=cfg.value_lr)

    def update(
        self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """One V step then one Q step, then the Polyak update of the target Q."""
        cfg = self.config
        s, a, s2 = batch["obs"], batch["action"], batch["next_obs"]
        reward, done = batch["reward"].float(), batch["done"].float()
        with torch.no_grad():
            q_t = self.critic.q_target(s, a).min(dim=0).values  # (B,)
        v = self.value(s).squeeze(-1)  # (B,)
        value_loss = expectile_loss(q_t - v, cfg.expectile)
        self.value_opt.zero_grad(set_to_none=True)
        value_loss.backward()
        self.value_opt.step()

        with torch.no_grad():
            target = reward + cfg.discount * (1.0 - done) * self.value(s2).squeeze(-1)  # (B,)
        q = self.critic.q(s, a)  # (E, B)
        critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        polyak_update(self.critic.q_target, self.critic.q, cfg.tau)
        return {
            "critic_loss": critic_loss.item(),
            "value_loss": value_loss.item(),
            "q": q.mean().item(),
            "v": v.mean().item(),
            "target_q": target.mean().item(),
        }

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer, by name (checkpointed for an exact resume)."""
        return {"critic": self.critic_opt, "value": self.value_opt}
