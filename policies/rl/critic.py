"""Q-function ensemble with LayerNorm and Polyak targets (SAC: 2 heads; REDQ/RLPD/EXPO: 10 heads)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from policies.rl.nets import EnsembleLayerNorm, EnsembleLinear, activation


class CriticEnsemble(nn.Module):
    """E Q-heads over (obs features, flattened action), evaluated in one batched pass.

    ``forward(obs, action) -> (E, B)``. ``reduce`` picks how a target is formed from heads:
    ``min`` over all heads (SAC), ``mean``, or ``min`` over a random subset of ``subset`` heads (REDQ/RLPD).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: list[int] | tuple[int, ...] = (256, 256),
        num_critics: int = 2,
        layer_norm: bool = True,
        act: str = "relu",
    ) -> None:
        super().__init__()
        self.num_critics = num_critics
        layers: list[nn.Module] = []
        dim = obs_dim + action_dim
        for width in hidden:
            layers.append(EnsembleLinear(dim, width, num_critics))
            if layer_norm:
                layers.append(EnsembleLayerNorm(width, num_critics))
            layers.append(activation(act)())
            dim = width
        layers.append(EnsembleLinear(dim, 1, num_critics))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs.flatten(1), action.flatten(1)], dim=-1)  # (B, Do + Da)
        x = x.unsqueeze(0).expand(self.num_critics, *x.shape)  # (E, B, Do + Da)
        return self.net(x).squeeze(-1)  # (E, B)

    def reduce(
        self,
        q: torch.Tensor,
        how: str = "min",
        subset: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Combine heads (E, B) → (B,): ``min``, ``mean``, or the min of a random ``subset`` of heads."""
        if subset is not None and subset < q.shape[0]:
            idx = torch.randperm(q.shape[0], generator=generator, device="cpu")[:subset].to(q.device)
            q = q[idx]
        if how == "min":
            return q.min(dim=0).values
        if how == "mean":
            return q.mean(dim=0)
        raise ValueError(f"critic reduction {how!r} is not known: expected 'min' or 'mean'")

    def make_target(self) -> CriticEnsemble:
        """A frozen copy to be tracked with ``polyak_update``."""
        target = copy.deepcopy(self)
        target.requires_grad_(False)
        return target


@torch.no_grad()
def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """target ← (1 − τ)·target + τ·online, parameter by parameter."""
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.lerp_(o, tau)
