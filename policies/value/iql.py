"""IQL critic (Kostrikov et al.): expectile regression of V onto Q, Q regressed onto r + γ·V(s').

Only the critic is learned: V-GPS needs Q(s, a), not IQL's advantage-weighted actor. Never queries Q on
actions outside the data, so it needs no conservatism term. Follows jaxrl_m's ``gc_iql.py`` with the V-GPS
``lc_iql`` values (nakamotoo/V-GPS ``experiments/configs/train_config.py``): expectile 0.7, discount 0.98,
2 critics and V of (256, 256) without LayerNorm, target rate 0.002 for Q *and* V (the TD target reads the
target V), 2000-step linear LR warm-up, TD loss = mean over heads and batch of (Q − y)² (no ½).

Ours, deliberately: V's step comes first and Q's target then reads the (Polyak-lagged) target V, where the
reference differentiates both losses at the same parameters.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from robosteer.policies.optim import lr_lambda
from robosteer.policies.rl import NormalizedCritic, mlp, polyak_update
from robosteer.policies.rl.nets import optimizer_step


@dataclass
class IQLConfig:
    """Every IQL hyper-parameter, each default written once here; every one is the reference's: V-GPS
    ``train_config.py`` ``lc_iql`` over jaxrl_m ``gc_iql.py`` (labels checked by tests/configs/test_reference_labels.py)."""

    discount: float = 0.98  # reference: γ per critic transition (a step for score=first, a chunk for chunk)
    expectile: float = 0.7  # reference: the expectile (0.5 = mean regression; → 1 = max over the data)
    tau: float = 0.002  # reference (target_update_rate): Polyak rate of target Q and target V
    critic_lr: float = 3e-4  # reference
    value_lr: float = 3e-4  # reference
    warmup_steps: int = 2000  # reference: linear LR warm-up of Q and V from 0
    hidden: list[int] = field(default_factory=lambda: [256, 256])  # reference
    num_critics: int = 2  # reference
    activation: str = "silu"  # reference: jaxrl_m MLP default (nn.swish)
    layer_norm: bool = False  # reference: jaxrl_m's MLP default (lc_iql sets none)

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
        self.value_target = copy.deepcopy(self.value).requires_grad_(False)
        self.critic_opt = torch.optim.Adam(critic.q.parameters(), lr=cfg.critic_lr)
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=cfg.value_lr)
        self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.warmup_steps, 0))
        self.value_sched = LambdaLR(self.value_opt, lr_lambda("constant", cfg.warmup_steps, 0))

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
        optimizer_step(self.value_opt, value_loss)
        self.value_sched.step()

        with torch.no_grad():
            target = reward + cfg.discount * (1.0 - done) * self.value_target(s2).squeeze(-1)  # (B,)
        q = self.critic.q(s, a)  # (E, B)
        critic_loss = ((q - target.unsqueeze(0)) ** 2).mean()
        optimizer_step(self.critic_opt, critic_loss)
        self.critic_sched.step()
        polyak_update(self.critic.q_target, self.critic.q, cfg.tau)
        polyak_update(self.value_target, self.value, cfg.tau)
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

    def schedulers(self) -> dict[str, torch.optim.lr_scheduler.LRScheduler]:
        """Every LR schedule, by name (checkpointed for an exact resume)."""
        return {"critic": self.critic_sched, "value": self.value_sched}
