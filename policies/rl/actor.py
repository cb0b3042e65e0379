"""Tanh-squashed diagonal Gaussian actor with exact log-probabilities (tanh Jacobian and scale)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from robosteer.policies.rl.nets import activation, mlp

# The log-std clamp of every actor here: DSRL's reference actor (SB3's) and EXPO's edit actor (jaxrl's TanhNormal)
# clamp log σ to [-20, 2] alike.
# ours (Cal-QL's log-std clamp): one clamp for every actor; V-GPS's Cal-QL actor (jaxrl_m's Policy) clips σ
# itself to [1e-5, 10], log σ in about [-11.5, 2.3]
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """log(1 − tanh(u)²), computed stably as 2·(log 2 − u − softplus(−2u))."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


class TanhGaussianActor(nn.Module):
    """π(·|s): u ~ N(μ(s), σ(s)²), output ``scale · tanh(u)``; every output lies strictly inside ±scale.

    ``log_prob`` includes the tanh Jacobian and, with ``scale_in_log_prob``, ``−log(scale)`` per dimension
    (EXPO's edit over ±β); without it, the density of ``tanh(u)`` as SB3's SAC scores it (DSRL-SAC).
    ``zero_init``: the mean head starts at exactly zero (DSRL: latent 0 is the base policy's own chunk).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: list[int] | tuple[int, ...] = (256, 256),
        scale: float = 1.0,
        act: str = "relu",
        layer_norm: bool = False,
        zero_init: bool = True,
        log_std_init: float = 0.0,
        scale_in_log_prob: bool = True,
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.scale = float(scale)
        self.log_scale = math.log(self.scale) if scale_in_log_prob else 0.0
        self.trunk = mlp(obs_dim, list(hidden)[:-1], list(hidden)[-1], act=act, layer_norm=layer_norm)
        self.trunk_act = nn.Sequential(
            nn.LayerNorm(hidden[-1]) if layer_norm else nn.Identity(), activation(act)()
        )
        self.mean = nn.Linear(hidden[-1], action_dim)
        self.log_std = nn.Linear(hidden[-1], action_dim)
        if zero_init:
            nn.init.zeros_(self.mean.weight)
            nn.init.zeros_(self.mean.bias)
        nn.init.zeros_(self.log_std.weight)
        nn.init.constant_(self.log_std.bias, log_std_init)

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std of the pre-tanh Gaussian, (B, Da) each."""
        h = self.trunk_act(self.trunk(obs.flatten(1)))
        log_std = self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return self.mean(h), log_std.exp()

    def log_prob_pre_tanh(self, u: torch.Tensor, mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """log π(scale·tanh(u)) (or of tanh(u): ``scale_in_log_prob``) for pre-tanh samples u: (B, Da) → (B,)."""
        gauss = -0.5 * ((u - mu) / std) ** 2 - std.log() - 0.5 * math.log(2 * math.pi)
        return (gauss - tanh_log_det(u) - self.log_scale).sum(-1)

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample an action (B, Da) in ±scale and its log-probability (B,); reparameterised."""
        mu, std = self.distribution(obs)
        u = mu
        if not deterministic:
            u = mu + std * torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
        squashed = torch.tanh(u).clamp(-1 + 1e-6, 1 - 1e-6)  # strictly inside ±scale even when saturated
        return self.scale * squashed, self.log_prob_pre_tanh(u, mu, std)

    def log_prob(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log π(action|obs) for actions strictly inside ±scale: (B, Da) → (B,)."""
        mu, std = self.distribution(obs)
        u = torch.atanh((action / self.scale).clamp(-1 + 1e-6, 1 - 1e-6))
        return self.log_prob_pre_tanh(u, mu, std)


class EncodedActor(nn.Module):
    """A :class:`TanhGaussianActor` over raw observations: ``encoder`` {key: (B, To, ...)} → (B, F) feeds
    ``head``, and the actor's loss trains both. An actor that learns what its own inputs hold, where a frozen
    encoder's features leave out what the task needs (a pixel base's embedding can drop the goal)."""

    def __init__(self, encoder: nn.Module, head: TanhGaussianActor) -> None:
        super().__init__()
        self.encoder, self.head = encoder, head
        self.action_dim = head.action_dim

    def forward(
        self,
        obs: dict[str, torch.Tensor],
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample an action (B, Da) and its log-probability (B,) for raw observation windows."""
        return self.head(self.encoder(obs), deterministic=deterministic, generator=generator)

    def log_prob(self, obs: dict[str, torch.Tensor], action: torch.Tensor) -> torch.Tensor:
        return self.head.log_prob(self.encoder(obs), action)
